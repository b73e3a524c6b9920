#include "vault_tpm.h"

#include <dlfcn.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>

// The functions vault calls, resolved once from the shared libraries. Each pointer has the
// type of the function its header declares, so the compiler checks every call.
#define ESYS_FUNCTIONS(X)                                                                   \
    X(Esys_Initialize) X(Esys_Finalize) X(Esys_Free) X(Esys_CreatePrimary) X(Esys_Create)  \
    X(Esys_Load) X(Esys_Unseal) X(Esys_FlushContext) X(Esys_TR_SetAuth) X(Esys_TR_GetName) \
    X(Esys_StartAuthSession) X(Esys_TRSess_SetAttributes) X(Esys_PolicyPCR)                \
    X(Esys_PolicyAuthValue) X(Esys_PolicyGetDigest) X(Esys_GetCapability) X(Esys_PCR_Read)     \
    X(Esys_GetSysContext) X(Esys_HierarchyChangeAuth)
#define TCTILDR_FUNCTIONS(X) X(Tss2_TctiLdr_Initialize) X(Tss2_TctiLdr_Finalize)
#define SYS_FUNCTIONS(X) X(Tss2_Sys_GetRpBuffer)
#define MU_FUNCTIONS(X)                                                       \
    X(Tss2_MU_TPM2B_PUBLIC_Marshal) X(Tss2_MU_TPM2B_PUBLIC_Unmarshal)         \
    X(Tss2_MU_TPM2B_PRIVATE_Marshal) X(Tss2_MU_TPM2B_PRIVATE_Unmarshal)

#define DECLARE(name) __typeof__(name) *name;
static struct {
    ESYS_FUNCTIONS(DECLARE)
    TCTILDR_FUNCTIONS(DECLARE)
    SYS_FUNCTIONS(DECLARE)
    MU_FUNCTIONS(DECLARE)
    // Optional: only for words about unexpected codes.
    __typeof__(Tss2_RC_Decode) *Tss2_RC_Decode;
} tss;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[240];

static void *open_library(const char *name) {
    void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL && load_error[0] == 0) snprintf(load_error, sizeof load_error, "%s", dlerror());
    return handle;
}

static void load(void) {
    // tpm2-tss logs its errors to stderr; vault says what failed in its own words. A user
    // who set TSS2_LOG to debug keeps it.
    setenv("TSS2_LOG", "all+NONE", 0);
    void *esys = open_library("libtss2-esys.so.0");
    void *tctildr = open_library("libtss2-tctildr.so.0");
    void *mu = open_library("libtss2-mu.so.0");
    void *sys = open_library("libtss2-sys.so.1");
    if (esys == NULL || tctildr == NULL || mu == NULL || sys == NULL) return;
    void *symbol;
#define RESOLVE(handle, name)                                                              \
    symbol = dlsym(handle, #name);                                                         \
    if (symbol == NULL) {                                                                  \
        snprintf(load_error, sizeof load_error, "%s is missing from tpm2-tss", #name);     \
        return;                                                                            \
    }                                                                                      \
    memcpy(&tss.name, &symbol, sizeof symbol);
#define FROM_ESYS(name) RESOLVE(esys, name)
#define FROM_TCTILDR(name) RESOLVE(tctildr, name)
#define FROM_MU(name) RESOLVE(mu, name)
#define FROM_SYS(name) RESOLVE(sys, name)
    ESYS_FUNCTIONS(FROM_ESYS)
    TCTILDR_FUNCTIONS(FROM_TCTILDR)
    SYS_FUNCTIONS(FROM_SYS)
    MU_FUNCTIONS(FROM_MU)
    void *rc = dlopen("libtss2-rc.so.0", RTLD_NOW | RTLD_LOCAL);
    if (rc != NULL) {
        symbol = dlsym(rc, "Tss2_RC_Decode");
        memcpy(&tss.Tss2_RC_Decode, &symbol, sizeof symbol);
    }
}

struct vault_tpm {
    TSS2_TCTI_CONTEXT *tcti;
    ESYS_CONTEXT *context;
};

static vault_tpm_status ok(void) { return (vault_tpm_status){.outcome = VAULT_TPM_OK, .step = ""}; }

static vault_tpm_status failure(vault_tpm_outcome outcome, TSS2_RC rc, const char *step) {
    return (vault_tpm_status){.outcome = outcome, .rc = rc, .step = step};
}

// The TPM's own code without the layer the resource manager may add, and without the
// handle, session or parameter number of a format-one code.
static TSS2_RC tpm_code(TSS2_RC rc) {
    TSS2_RC layer = rc & 0xFF0000;
    if (layer != TSS2_TPM_RC_LAYER && layer != TSS2_RESMGR_TPM_RC_LAYER) return rc;
    rc &= 0xFFFF;
    return (rc & TPM2_RC_FMT1) ? (rc & (TPM2_RC_FMT1 | 0x3F)) : (rc & 0xFFF);
}

// A failed authorization: of the sealed object (the PIN, the policy, or lockout), or of the
// lockout hierarchy (its value, or its own lockout after a wrong one).
static vault_tpm_status authorization_failure(TSS2_RC rc, const char *step) {
    switch (tpm_code(rc)) {
    case TPM2_RC_AUTH_FAIL:
    case TPM2_RC_BAD_AUTH: return failure(VAULT_TPM_AUTH_FAIL, rc, step);
    case TPM2_RC_LOCKOUT: return failure(VAULT_TPM_LOCKOUT, rc, step);
    case TPM2_RC_POLICY_FAIL: return failure(VAULT_TPM_POLICY_FAIL, rc, step);
    default: return failure(VAULT_TPM_FAILED, rc, step);
    }
}

vault_tpm_status vault_tpm_load(void) {
    pthread_once(&load_once, load);
    if (load_error[0] == 0) return ok();
    vault_tpm_status status = failure(VAULT_TPM_NO_LIBRARY, 0, "dlopen");
    snprintf(status.detail, sizeof status.detail, "%s", load_error);
    return status;
}

vault_tpm_status vault_tpm_open(const char *tcti, vault_tpm **tpm) {
    vault_tpm_status library = vault_tpm_load();
    if (library.outcome != VAULT_TPM_OK) return library;
    vault_tpm *connection = calloc(1, sizeof *connection);
    if (connection == NULL) return failure(VAULT_TPM_FAILED, TSS2_BASE_RC_MEMORY, "calloc");
    TSS2_RC rc = tss.Tss2_TctiLdr_Initialize(tcti, &connection->tcti);
    if (rc != TSS2_RC_SUCCESS) {
        free(connection);
        // The loader says only that it failed: a TCTI module that is not installed is told
        // apart from a TPM that does not answer by opening the module here.
        char module[96];
        size_t name = strcspn(tcti, ":");
        snprintf(module, sizeof module, "libtss2-tcti-%.*s.so.0", (int)(name < 40 ? name : 40), tcti);
        void *handle = dlopen(module, RTLD_LAZY | RTLD_LOCAL);
        vault_tpm_status status = failure(handle == NULL ? VAULT_TPM_NO_LIBRARY : VAULT_TPM_NO_CONNECTION, rc,
                                          "Tss2_TctiLdr_Initialize");
        snprintf(status.detail, sizeof status.detail, "%s", handle == NULL ? dlerror() : tcti);
        if (handle != NULL) dlclose(handle);
        return status;
    }
    rc = tss.Esys_Initialize(&connection->context, connection->tcti, NULL);
    if (rc != TSS2_RC_SUCCESS) {
        tss.Tss2_TctiLdr_Finalize(&connection->tcti);
        free(connection);
        return failure(VAULT_TPM_FAILED, rc, "Esys_Initialize");
    }
    *tpm = connection;
    return ok();
}

void vault_tpm_close(vault_tpm *tpm) {
    if (tpm == NULL) return;
    tss.Esys_Finalize(&tpm->context);
    tss.Tss2_TctiLdr_Finalize(&tpm->tcti);
    free(tpm);
}

// Objects and sessions loaded for one call, flushed at its end whatever happened.
typedef struct {
    ESYS_TR handles[4];
    int count;
} loaded;

static void keep(loaded *set, ESYS_TR handle) { set->handles[set->count++] = handle; }

static void flush(vault_tpm *tpm, loaded *set) {
    while (set->count > 0) tss.Esys_FlushContext(tpm->context, set->handles[--set->count]);
}

// Parameter encryption and salting: AES-128 in CFB mode, the one every TPM 2.0 has.
static const TPMT_SYM_DEF session_cipher = {
    .algorithm = TPM2_ALG_AES, .keyBits = {.aes = 128}, .mode = {.aes = TPM2_ALG_CFB}};

// The storage primary key under the owner hierarchy: an ECC P-256 restricted decryption key,
// derived again from the hierarchy's seed each time, so nothing is stored in the TPM. Its
// name is the same on every call while the owner hierarchy is not cleared, and differs on
// every other TPM.
static vault_tpm_status storage_key(vault_tpm *tpm, loaded *set, ESYS_TR *primary, uint8_t *name) {
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    TPM2B_PUBLIC template = {
        .publicArea = {
            .type = TPM2_ALG_ECC,
            .nameAlg = TPM2_ALG_SHA256,
            .objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                                TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA | TPMA_OBJECT_RESTRICTED |
                                TPMA_OBJECT_DECRYPT,
            .parameters = {.eccDetail = {.symmetric = {.algorithm = TPM2_ALG_AES,
                                                       .keyBits = {.aes = 128},
                                                       .mode = {.aes = TPM2_ALG_CFB}},
                                         .scheme = {.scheme = TPM2_ALG_NULL},
                                         .curveID = TPM2_ECC_NIST_P256,
                                         .kdf = {.scheme = TPM2_ALG_NULL}}},
        }};
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION creation = {0};
    TPM2B_PUBLIC *public = NULL;
    TPM2B_CREATION_DATA *creation_data = NULL;
    TPM2B_DIGEST *creation_hash = NULL;
    TPMT_TK_CREATION *ticket = NULL;
    TSS2_RC rc = tss.Esys_CreatePrimary(tpm->context, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                        &sensitive, &template, &outside, &creation, primary, &public,
                                        &creation_data, &creation_hash, &ticket);
    tss.Esys_Free(public);
    tss.Esys_Free(creation_data);
    tss.Esys_Free(creation_hash);
    tss.Esys_Free(ticket);
    if (rc != TSS2_RC_SUCCESS) {
        TSS2_RC code = tpm_code(rc);
        return failure(code == TPM2_RC_BAD_AUTH || code == TPM2_RC_AUTH_FAIL ? VAULT_TPM_OWNER_AUTH : VAULT_TPM_FAILED,
                       rc, "TPM2_CreatePrimary");
    }
    keep(set, *primary);
    TPM2B_NAME *found = NULL;
    rc = tss.Esys_TR_GetName(tpm->context, *primary, &found);
    if (rc != TSS2_RC_SUCCESS) return failure(VAULT_TPM_FAILED, rc, "Esys_TR_GetName");
    int right_size = found->size == VAULT_TPM_NAME_LENGTH;
    if (right_size) memcpy(name, found->name, VAULT_TPM_NAME_LENGTH);
    tss.Esys_Free(found);
    return right_size ? ok() : failure(VAULT_TPM_FAILED, TSS2_ESYS_RC_MALFORMED_RESPONSE, "Esys_TR_GetName");
}

// A session salted to the storage key, so its keys are unknown to anyone who only watches
// the bus, with the first parameter encrypted both ways: the secret going in on TPM2_Create
// and coming out of TPM2_Unseal never crosses the bus in the clear, and the PIN never does
// at all (it keys the session's HMAC).
static vault_tpm_status salted_session(vault_tpm *tpm, loaded *set, ESYS_TR primary, TPM2_SE type, ESYS_TR *session) {
    TSS2_RC rc = tss.Esys_StartAuthSession(tpm->context, primary, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                           ESYS_TR_NONE, NULL, type, &session_cipher, TPM2_ALG_SHA256, session);
    if (rc != TSS2_RC_SUCCESS) return failure(VAULT_TPM_FAILED, rc, "TPM2_StartAuthSession");
    keep(set, *session);
    TPMA_SESSION attributes = TPMA_SESSION_DECRYPT | TPMA_SESSION_ENCRYPT | TPMA_SESSION_CONTINUESESSION;
    rc = tss.Esys_TRSess_SetAttributes(tpm->context, *session, attributes, 0xFF);
    return rc == TSS2_RC_SUCCESS ? ok() : failure(VAULT_TPM_FAILED, rc, "Esys_TRSess_SetAttributes");
}

static TPML_PCR_SELECTION sha256_selection(uint32_t mask) {
    TPML_PCR_SELECTION selection = {.count = 1};
    selection.pcrSelections[0].hash = TPM2_ALG_SHA256;
    selection.pcrSelections[0].sizeofSelect = 3;
    for (int byte = 0; byte < 3; byte++) selection.pcrSelections[0].pcrSelect[byte] = (uint8_t)(mask >> (8 * byte));
    return selection;
}

vault_tpm_status vault_tpm_read_pcrs(vault_tpm *tpm, uint32_t pcr_mask, uint8_t *values) {
    // A TPM answers at most eight PCRs a read: ask again for the rest.
    uint32_t wanted = pcr_mask & ((1u << VAULT_TPM_PCRS) - 1);
    while (wanted != 0) {
        TPML_PCR_SELECTION selection = sha256_selection(wanted), *returned = NULL;
        TPML_DIGEST *digests = NULL;
        UINT32 counter = 0;
        TSS2_RC rc = tss.Esys_PCR_Read(tpm->context, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &selection, &counter,
                                       &returned, &digests);
        if (rc != TSS2_RC_SUCCESS) return failure(VAULT_TPM_FAILED, rc, "TPM2_PCR_Read");
        uint32_t got = 0;
        for (UINT32 bank = 0; bank < returned->count; bank++) {
            if (returned->pcrSelections[bank].hash != TPM2_ALG_SHA256) continue;
            for (int byte = 0; byte < 3 && byte < returned->pcrSelections[bank].sizeofSelect; byte++)
                got |= (uint32_t)returned->pcrSelections[bank].pcrSelect[byte] << (8 * byte);
        }
        got &= wanted;
        UINT32 index = 0;
        int well_formed = got != 0;
        for (int pcr = 0; pcr < VAULT_TPM_PCRS && well_formed; pcr++) {
            if (!(got & (1u << pcr))) continue;
            well_formed = index < digests->count && digests->digests[index].size == 32;
            if (!well_formed) break;
            // Its place among the PCRs of the whole mask, lowest first.
            int slot = __builtin_popcount(pcr_mask & ((1u << pcr) - 1));
            memcpy(values + 32 * slot, digests->digests[index].buffer, 32);
            index++;
        }
        tss.Esys_Free(returned);
        tss.Esys_Free(digests);
        // A TPM without a SHA-256 bank, or one that returned nothing asked for.
        if (!well_formed) return failure(VAULT_TPM_FAILED, TPM2_RC_PCR, "TPM2_PCR_Read");
        wanted &= ~got;
    }
    return ok();
}

// The digest of the policy the sealed object carries: its PCRs as they are now (given as
// `values`, so the policy holds exactly what is recorded), then the authorization value when
// there is one.
static vault_tpm_status policy_digest(vault_tpm *tpm, loaded *set, uint32_t pcr_mask, const uint8_t *values,
                                      int with_auth, TPM2B_DIGEST *digest) {
    ESYS_TR trial;
    TSS2_RC rc = tss.Esys_StartAuthSession(tpm->context, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                           ESYS_TR_NONE, NULL, TPM2_SE_TRIAL, &session_cipher, TPM2_ALG_SHA256, &trial);
    if (rc != TSS2_RC_SUCCESS) return failure(VAULT_TPM_FAILED, rc, "TPM2_StartAuthSession");
    keep(set, trial);
    TPM2B_DIGEST pcr_digest = {.size = 32};
    SHA256(values, 32 * (size_t)__builtin_popcount(pcr_mask), pcr_digest.buffer);
    TPML_PCR_SELECTION selection = sha256_selection(pcr_mask);
    rc = tss.Esys_PolicyPCR(tpm->context, trial, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &pcr_digest, &selection);
    if (rc != TSS2_RC_SUCCESS) return failure(VAULT_TPM_FAILED, rc, "TPM2_PolicyPCR");
    if (with_auth) {
        rc = tss.Esys_PolicyAuthValue(tpm->context, trial, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE);
        if (rc != TSS2_RC_SUCCESS) return failure(VAULT_TPM_FAILED, rc, "TPM2_PolicyAuthValue");
    }
    TPM2B_DIGEST *result = NULL;
    rc = tss.Esys_PolicyGetDigest(tpm->context, trial, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &result);
    if (rc != TSS2_RC_SUCCESS) return failure(VAULT_TPM_FAILED, rc, "TPM2_PolicyGetDigest");
    *digest = *result;
    tss.Esys_Free(result);
    return ok();
}

vault_tpm_status vault_tpm_seal(vault_tpm *tpm, const uint8_t *secret, size_t secret_length,
                                const uint8_t *auth, size_t auth_length, uint32_t pcr_mask,
                                uint8_t *parent_name, uint8_t *pcr_values,
                                uint8_t *public_blob, size_t *public_length,
                                uint8_t *private_blob, size_t *private_length) {
    if (secret_length == 0 || secret_length > VAULT_TPM_MAX_SECRET || auth_length > VAULT_TPM_MAX_AUTH ||
        pcr_mask >= (1u << VAULT_TPM_PCRS))
        return failure(VAULT_TPM_FAILED, TSS2_ESYS_RC_BAD_VALUE, "vault_tpm_seal");
    loaded set = {0};
    ESYS_TR primary, session;
    vault_tpm_status status = storage_key(tpm, &set, &primary, parent_name);
    TPM2B_DIGEST policy = {0};
    if (status.outcome == VAULT_TPM_OK && pcr_mask != 0) {
        status = vault_tpm_read_pcrs(tpm, pcr_mask, pcr_values);
        if (status.outcome == VAULT_TPM_OK) status = policy_digest(tpm, &set, pcr_mask, pcr_values, auth_length > 0, &policy);
    }
    if (status.outcome == VAULT_TPM_OK) status = salted_session(tpm, &set, primary, TPM2_SE_HMAC, &session);
    if (status.outcome != VAULT_TPM_OK) {
        flush(tpm, &set);
        return status;
    }
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    sensitive.sensitive.userAuth.size = (UINT16)auth_length;
    if (auth_length > 0) memcpy(sensitive.sensitive.userAuth.buffer, auth, auth_length);
    sensitive.sensitive.data.size = (UINT16)secret_length;
    memcpy(sensitive.sensitive.data.buffer, secret, secret_length);
    // With a policy, only a policy session opens the object (userWithAuth clear), so the PIN
    // alone does not do without the PCRs. Without a PIN, there is nothing to guess: the object
    // stays outside dictionary-attack protection, and no failure of it counts toward lockout.
    TPMA_OBJECT attributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT;
    if (pcr_mask == 0) attributes |= TPMA_OBJECT_USERWITHAUTH;
    if (auth_length == 0) attributes |= TPMA_OBJECT_NODA;
    TPM2B_PUBLIC template = {
        .publicArea = {
            .type = TPM2_ALG_KEYEDHASH,
            .nameAlg = TPM2_ALG_SHA256,
            .objectAttributes = attributes,
            .authPolicy = policy,
            .parameters = {.keyedHashDetail = {.scheme = {.scheme = TPM2_ALG_NULL}}},
        }};
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION creation = {0};
    TPM2B_PRIVATE *private = NULL;
    TPM2B_PUBLIC *public = NULL;
    TPM2B_CREATION_DATA *creation_data = NULL;
    TPM2B_DIGEST *creation_hash = NULL;
    TPMT_TK_CREATION *ticket = NULL;
    TSS2_RC rc = tss.Esys_Create(tpm->context, primary, session, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &template,
                                 &outside, &creation, &private, &public, &creation_data, &creation_hash, &ticket);
    OPENSSL_cleanse(&sensitive, sizeof sensitive);
    tss.Esys_Free(creation_data);
    tss.Esys_Free(creation_hash);
    tss.Esys_Free(ticket);
    flush(tpm, &set);
    if (rc != TSS2_RC_SUCCESS) return failure(VAULT_TPM_FAILED, rc, "TPM2_Create");
    size_t public_offset = 0, private_offset = 0;
    rc = tss.Tss2_MU_TPM2B_PUBLIC_Marshal(public, public_blob, *public_length, &public_offset);
    if (rc == TSS2_RC_SUCCESS) rc = tss.Tss2_MU_TPM2B_PRIVATE_Marshal(private, private_blob, *private_length, &private_offset);
    tss.Esys_Free(public);
    tss.Esys_Free(private);
    if (rc != TSS2_RC_SUCCESS) return failure(VAULT_TPM_FAILED, rc, "Tss2_MU_Marshal");
    *public_length = public_offset;
    *private_length = private_offset;
    return ok();
}

// tpm2-tss keeps its own copies of what an unseal handles, and frees them without wiping:
// the response, decrypted in place in its command buffer (which lives as long as the
// connection, then goes back to the heap as it is), and the authorization value, in its
// records of the object and of the session. In a long-running `vault serve` these would lie
// in ordinary, swappable memory for days: the unsealed key opens the keystore on any
// machine, and the authorization value gives the PIN to a few million hashes (its salt is
// in the keystore) and then to the TPM without its lockout. So each is overwritten as soon
// as it has served (TPMTests.serveKeepsNoCopyOfWhatTheTPMUnsealed looks for them in serve's
// memory).

// The response parameters of the last command (for TPM2_Unseal: the sealed data's size and
// bytes), at most `most` bytes of them.
static void wipe_response(vault_tpm *tpm, size_t most) {
    TSS2_SYS_CONTEXT *sys = NULL;
    const uint8_t *parameters = NULL;
    size_t size = 0;
    if (tss.Esys_GetSysContext(tpm->context, &sys) != TSS2_RC_SUCCESS || sys == NULL) return;
    if (tss.Tss2_Sys_GetRpBuffer(sys, &size, &parameters) != TSS2_RC_SUCCESS || parameters == NULL) return;
    OPENSSL_cleanse((void *)parameters, size < most ? size : most);
}

// The session's record of the authorization value: ESAPI appends it to the session's key
// for each command the session authorizes, and keeps it there until it authorizes another.
// So the same session authorizes one more command, on the storage key, which ESAPI is told
// has 32 zero bytes as its authorization value: they overwrite the PIN's. The storage key
// is outside dictionary-attack protection (noDA), so whatever the TPM answers costs no try,
// and the command is TPM2_Load of an empty private part, which the TPM refuses after the
// authorization: nothing is loaded. (An HMAC session passes that authorization, since HMAC
// pads its key with zeros to its block, making the session key and 32 zero bytes the
// session key itself; a policy session fails it.)
static void wipe_session_auth(vault_tpm *tpm, ESYS_TR primary, ESYS_TR session, const TPM2B_PUBLIC *public) {
    TPM2B_AUTH zeros = {.size = VAULT_TPM_MAX_AUTH};
    if (tss.Esys_TR_SetAuth(tpm->context, primary, &zeros) != TSS2_RC_SUCCESS) return;
    TPM2B_PRIVATE empty = {0};
    ESYS_TR copy = ESYS_TR_NONE;
    if (tss.Esys_Load(tpm->context, primary, session, ESYS_TR_NONE, ESYS_TR_NONE, &empty, public, &copy) == TSS2_RC_SUCCESS)
        tss.Esys_FlushContext(tpm->context, copy);
    TPM2B_AUTH none = {0};
    tss.Esys_TR_SetAuth(tpm->context, primary, &none);
}

vault_tpm_status vault_tpm_unseal(vault_tpm *tpm, const uint8_t *parent_name,
                                  const uint8_t *public_blob, size_t public_length,
                                  const uint8_t *private_blob, size_t private_length,
                                  const uint8_t *auth, size_t auth_length, uint32_t pcr_mask,
                                  uint8_t *found_name, uint8_t *secret, size_t *secret_length) {
    TPM2B_PUBLIC public = {0};
    TPM2B_PRIVATE private = {0};
    size_t public_offset = 0, private_offset = 0;
    // The blobs are read whole and exactly: a byte more or less is a damaged keystore.
    TSS2_RC rc = tss.Tss2_MU_TPM2B_PUBLIC_Unmarshal(public_blob, public_length, &public_offset, &public);
    if (rc == TSS2_RC_SUCCESS) rc = tss.Tss2_MU_TPM2B_PRIVATE_Unmarshal(private_blob, private_length, &private_offset, &private);
    if (rc != TSS2_RC_SUCCESS || public_offset != public_length || private_offset != private_length ||
        auth_length > VAULT_TPM_MAX_AUTH || pcr_mask >= (1u << VAULT_TPM_PCRS))
        return failure(VAULT_TPM_BAD_OBJECT, rc, "Tss2_MU_Unmarshal");
    loaded set = {0};
    ESYS_TR primary, session, object;
    vault_tpm_status status = storage_key(tpm, &set, &primary, found_name);
    if (status.outcome == VAULT_TPM_OK && memcmp(found_name, parent_name, VAULT_TPM_NAME_LENGTH) != 0)
        status = failure(VAULT_TPM_OTHER_PARENT, 0, "TPM2_CreatePrimary");
    if (status.outcome == VAULT_TPM_OK) status = salted_session(tpm, &set, primary, TPM2_SE_HMAC, &session);
    if (status.outcome == VAULT_TPM_OK) {
        rc = tss.Esys_Load(tpm->context, primary, session, ESYS_TR_NONE, ESYS_TR_NONE, &private, &public, &object);
        if (rc == TSS2_RC_SUCCESS) keep(&set, object);
        else status = failure(VAULT_TPM_BAD_OBJECT, rc, "TPM2_Load");
    }
    if (status.outcome == VAULT_TPM_OK && pcr_mask != 0) {
        // The policy session replaces the HMAC one: the PCRs as they are now, then the PIN.
        status = salted_session(tpm, &set, primary, TPM2_SE_POLICY, &session);
        TPM2B_DIGEST current = {0};
        TPML_PCR_SELECTION selection = sha256_selection(pcr_mask);
        if (status.outcome == VAULT_TPM_OK) {
            rc = tss.Esys_PolicyPCR(tpm->context, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &current, &selection);
            if (rc != TSS2_RC_SUCCESS) status = failure(VAULT_TPM_FAILED, rc, "TPM2_PolicyPCR");
        }
        if (status.outcome == VAULT_TPM_OK && auth_length > 0) {
            rc = tss.Esys_PolicyAuthValue(tpm->context, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE);
            if (rc != TSS2_RC_SUCCESS) status = failure(VAULT_TPM_FAILED, rc, "TPM2_PolicyAuthValue");
        }
    }
    if (status.outcome == VAULT_TPM_OK) {
        TPM2B_AUTH value = {.size = (UINT16)auth_length};
        if (auth_length > 0) memcpy(value.buffer, auth, auth_length);
        rc = tss.Esys_TR_SetAuth(tpm->context, object, &value);
        OPENSSL_cleanse(&value, sizeof value);
        if (rc != TSS2_RC_SUCCESS) status = failure(VAULT_TPM_FAILED, rc, "Esys_TR_SetAuth");
    }
    if (status.outcome == VAULT_TPM_OK) {
        TPM2B_SENSITIVE_DATA *data = NULL;
        rc = tss.Esys_Unseal(tpm->context, object, session, ESYS_TR_NONE, ESYS_TR_NONE, &data);
        wipe_response(tpm, sizeof(TPM2B_SENSITIVE_DATA));
        if (rc != TSS2_RC_SUCCESS) {
            status = authorization_failure(rc, "TPM2_Unseal");
        } else {
            if (data->size <= *secret_length) {
                memcpy(secret, data->buffer, data->size);
                *secret_length = data->size;
            } else {
                status = failure(VAULT_TPM_BAD_OBJECT, TSS2_ESYS_RC_INSUFFICIENT_BUFFER, "TPM2_Unseal");
            }
            OPENSSL_cleanse(data, sizeof *data);
            tss.Esys_Free(data);
        }
        // Its record of the object's authorization: a whole TPM2B_AUTH of zeros is copied
        // over it, buffer and all.
        TPM2B_AUTH none = {0};
        tss.Esys_TR_SetAuth(tpm->context, object, &none);
        if (auth_length > 0) wipe_session_auth(tpm, primary, session, &public);
    }
    flush(tpm, &set);
    return status;
}

static vault_tpm_status properties(vault_tpm *tpm, TPM2_PT first, UINT32 count, TPML_TAGGED_TPM_PROPERTY **list) {
    TPMI_YES_NO more = 0;
    TPMS_CAPABILITY_DATA *data = NULL;
    TSS2_RC rc = tss.Esys_GetCapability(tpm->context, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                        TPM2_CAP_TPM_PROPERTIES, first, count, &more, &data);
    if (rc != TSS2_RC_SUCCESS) return failure(VAULT_TPM_FAILED, rc, "TPM2_GetCapability");
    *list = malloc(sizeof **list);
    if (*list == NULL) {
        tss.Esys_Free(data);
        return failure(VAULT_TPM_FAILED, TSS2_BASE_RC_MEMORY, "malloc");
    }
    **list = data->data.tpmProperties;
    tss.Esys_Free(data);
    return ok();
}

vault_tpm_status vault_tpm_lockout(vault_tpm *tpm, vault_tpm_lockout_state *state) {
    TPML_TAGGED_TPM_PROPERTY *list = NULL;
    vault_tpm_status status = properties(tpm, TPM2_PT_PERMANENT, 1, &list);
    if (status.outcome != VAULT_TPM_OK) return status;
    memset(state, 0, sizeof *state);
    for (UINT32 i = 0; i < list->count; i++) {
        if (list->tpmProperty[i].property != TPM2_PT_PERMANENT) continue;
        state->in_lockout = (list->tpmProperty[i].value & TPMA_PERMANENT_INLOCKOUT) != 0;
        state->lockout_auth_set = (list->tpmProperty[i].value & TPMA_PERMANENT_LOCKOUTAUTHSET) != 0;
    }
    free(list);
    status = properties(tpm, TPM2_PT_LOCKOUT_COUNTER, 4, &list);
    if (status.outcome != VAULT_TPM_OK) return status;
    for (UINT32 i = 0; i < list->count; i++) {
        UINT32 value = list->tpmProperty[i].value;
        switch (list->tpmProperty[i].property) {
        case TPM2_PT_LOCKOUT_COUNTER: state->failures = value; break;
        case TPM2_PT_MAX_AUTH_FAIL: state->max_failures = value; break;
        case TPM2_PT_LOCKOUT_INTERVAL: state->interval = value; break;
        case TPM2_PT_LOCKOUT_RECOVERY: state->recovery = value; break;
        default: break;
        }
    }
    free(list);
    return ok();
}

// Whoever has the lockout hierarchy's authorization can reset the dictionary-attack counter
// (TPM2_DictionaryAttackLockReset), change its parameters, or clear the TPM: it is what
// keeps the PIN's guess limit a limit. So it travels as the PIN does. The new value is the
// command's first parameter, encrypted by a session salted to the storage key (its response
// has no parameter, and the TPM refuses `encrypt` without one); the current value only keys
// the session's HMAC. Then tpm2-tss's copies of both are overwritten as after an unseal: its
// record of the hierarchy's value (holding the new one after a change), the session's
// (`wipe_session_auth`), and the command's input it keeps for a resubmission, which the
// Load of that wipe stores its own, larger input over.
vault_tpm_status vault_tpm_change_lockout_auth(vault_tpm *tpm, const uint8_t *current, size_t current_length,
                                               const uint8_t *new_auth, size_t new_length) {
    if (current_length > VAULT_TPM_MAX_AUTH || new_length > VAULT_TPM_MAX_AUTH)
        return failure(VAULT_TPM_FAILED, TSS2_ESYS_RC_BAD_VALUE, "vault_tpm_change_lockout_auth");
    loaded set = {0};
    ESYS_TR primary, session;
    uint8_t name[VAULT_TPM_NAME_LENGTH];
    vault_tpm_status status = storage_key(tpm, &set, &primary, name);
    if (status.outcome == VAULT_TPM_OK) status = salted_session(tpm, &set, primary, TPM2_SE_HMAC, &session);
    if (status.outcome == VAULT_TPM_OK) {
        TSS2_RC rc = tss.Esys_TRSess_SetAttributes(tpm->context, session, 0, TPMA_SESSION_ENCRYPT);
        if (rc != TSS2_RC_SUCCESS) status = failure(VAULT_TPM_FAILED, rc, "Esys_TRSess_SetAttributes");
    }
    if (status.outcome == VAULT_TPM_OK) {
        TPM2B_AUTH value = {.size = (UINT16)current_length};
        if (current_length > 0) memcpy(value.buffer, current, current_length);
        TSS2_RC rc = tss.Esys_TR_SetAuth(tpm->context, ESYS_TR_RH_LOCKOUT, &value);
        OPENSSL_cleanse(&value, sizeof value);
        if (rc != TSS2_RC_SUCCESS) status = failure(VAULT_TPM_FAILED, rc, "Esys_TR_SetAuth");
    }
    if (status.outcome == VAULT_TPM_OK) {
        TPM2B_AUTH value = {.size = (UINT16)new_length};
        if (new_length > 0) memcpy(value.buffer, new_auth, new_length);
        TSS2_RC rc = tss.Esys_HierarchyChangeAuth(tpm->context, ESYS_TR_RH_LOCKOUT, session, ESYS_TR_NONE, ESYS_TR_NONE,
                                                  &value);
        OPENSSL_cleanse(&value, sizeof value);
        if (rc != TSS2_RC_SUCCESS) status = authorization_failure(rc, "TPM2_HierarchyChangeAuth");
        TPM2B_AUTH none = {0};
        tss.Esys_TR_SetAuth(tpm->context, ESYS_TR_RH_LOCKOUT, &none);
        // Any public part serves the wipe's Load, which the TPM refuses for its empty private part.
        const TPM2B_PUBLIC placeholder = {
            .publicArea = {
                .type = TPM2_ALG_KEYEDHASH,
                .nameAlg = TPM2_ALG_SHA256,
                .objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_USERWITHAUTH,
                .parameters = {.keyedHashDetail = {.scheme = {.scheme = TPM2_ALG_NULL}}},
            }};
        wipe_session_auth(tpm, primary, session, &placeholder);
    }
    flush(tpm, &set);
    return status;
}

const char *vault_tpm_describe(uint32_t rc) {
    pthread_once(&load_once, load);
    return tss.Tss2_RC_Decode != NULL ? tss.Tss2_RC_Decode(rc) : NULL;
}
