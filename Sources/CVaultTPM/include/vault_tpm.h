#ifndef VAULT_TPM_H
#define VAULT_TPM_H

// The TPM 2.0, through tpm2-tss (ESAPI and the TCTI loader), loaded at run time with dlopen:
// a vault that never uses the TPM starts on a machine without tpm2-tss. The TPM's command
// sequences live here, in C, where its structures are written as the specification writes
// them; Swift (VaultCore/TPM) sees byte strings and outcomes.

#include <stddef.h>
#include <stdint.h>

/// What a call came to.
typedef enum {
    VAULT_TPM_OK = 0,
    /// tpm2-tss is not installed (or a symbol is missing): `detail` is dlerror's text.
    VAULT_TPM_NO_LIBRARY,
    /// The TCTI could not reach a TPM (no device, a refused connection): `detail` says where.
    VAULT_TPM_NO_CONNECTION,
    /// The storage key this TPM derives is not the one the object was sealed under: another
    /// TPM, or this one after its owner hierarchy was cleared.
    VAULT_TPM_OTHER_PARENT,
    /// The authorization (the PIN, or the lockout hierarchy's) was wrong, and the TPM counted
    /// the failure.
    VAULT_TPM_AUTH_FAIL,
    /// The TPM is in dictionary-attack lockout (for the lockout hierarchy: it refuses every
    /// authorization for its recovery time after a wrong one).
    VAULT_TPM_LOCKOUT,
    /// The policy did not hold: the PCRs differ from those the object was sealed to.
    VAULT_TPM_POLICY_FAIL,
    /// The owner hierarchy has an authorization value, and vault has none to give.
    VAULT_TPM_OWNER_AUTH,
    /// The blobs do not load under the storage key (damaged).
    VAULT_TPM_BAD_OBJECT,
    /// Anything else: `rc` and `step` say what.
    VAULT_TPM_FAILED,
} vault_tpm_outcome;

/// A call's outcome, with the TSS2 response code and the step that gave it.
typedef struct {
    vault_tpm_outcome outcome;
    uint32_t rc;
    /// The TPM command or library call that failed (a static string), or "".
    const char *step;
    /// dlerror's text, or the TCTI configuration that did not connect; NUL-terminated.
    char detail[240];
} vault_tpm_status;

/// A connection to one TPM (an ESAPI context over a TCTI).
typedef struct vault_tpm vault_tpm;

/// The most a sealed object holds (TPM2B_SENSITIVE_DATA).
#define VAULT_TPM_MAX_SECRET 128
/// The most an authorization value holds (a SHA-256 digest).
#define VAULT_TPM_MAX_AUTH 32
/// The PCRs of a bank (a mask of 24 bits).
#define VAULT_TPM_PCRS 24
/// A TPM name with SHA-256: the algorithm (2) and the digest (32).
#define VAULT_TPM_NAME_LENGTH 34
/// Room for a marshalled TPM2B_PUBLIC or TPM2B_PRIVATE.
#define VAULT_TPM_BLOB_CAPACITY 1024

/// Loads tpm2-tss (once): VAULT_TPM_OK, or VAULT_TPM_NO_LIBRARY with dlerror's text.
vault_tpm_status vault_tpm_load(void);

/// Loads tpm2-tss (once) and connects to the TPM that `tcti` names ("device:/dev/tpmrm0",
/// "swtpm:host=127.0.0.1,port=2321", ...).
vault_tpm_status vault_tpm_open(const char *tcti, vault_tpm **tpm);

/// Flushes what the connection loaded and closes it.
void vault_tpm_close(vault_tpm *tpm);

/// Seals `secret` in a data object under the owner hierarchy's storage primary key, with
/// `auth` as its authorization value (none when `auth_length` is 0; then the object is
/// outside dictionary-attack protection) and, when `pcr_mask` is not 0, a policy on those
/// SHA-256 PCRs (and on the authorization value). Fills the storage key's name
/// (VAULT_TPM_NAME_LENGTH bytes), the PCR values the policy holds (32 bytes for each PCR in
/// the mask, lowest first) and the object's marshalled public and private parts
/// (`*_length` in: capacity; out: length).
vault_tpm_status vault_tpm_seal(vault_tpm *tpm, const uint8_t *secret, size_t secret_length,
                                const uint8_t *auth, size_t auth_length, uint32_t pcr_mask,
                                uint8_t *parent_name, uint8_t *pcr_values,
                                uint8_t *public_blob, size_t *public_length,
                                uint8_t *private_blob, size_t *private_length);

/// Unseals an object sealed by vault_tpm_seal: checks first that this TPM's storage key is
/// `parent_name` (VAULT_TPM_OTHER_PARENT otherwise, with the name found in `found_name`),
/// then loads the object and unseals it through a session salted to the storage key, with
/// the response encrypted. `secret_length` in: capacity; out: length.
vault_tpm_status vault_tpm_unseal(vault_tpm *tpm, const uint8_t *parent_name,
                                  const uint8_t *public_blob, size_t public_length,
                                  const uint8_t *private_blob, size_t private_length,
                                  const uint8_t *auth, size_t auth_length, uint32_t pcr_mask,
                                  uint8_t *found_name, uint8_t *secret, size_t *secret_length);

/// Reads the SHA-256 PCRs in `pcr_mask`: 32 bytes each, lowest first.
vault_tpm_status vault_tpm_read_pcrs(vault_tpm *tpm, uint32_t pcr_mask, uint8_t *values);

/// The dictionary-attack state: failed tries counted, the most before lockout, the seconds
/// after which one failure is forgotten, the seconds a lockout-hierarchy failure locks,
/// whether the TPM is locked out now, and whether the lockout hierarchy has an authorization
/// value (lockoutAuthSet: changed since the TPM was last cleared).
typedef struct {
    uint32_t failures;
    uint32_t max_failures;
    uint32_t interval;
    uint32_t recovery;
    int in_lockout;
    int lockout_auth_set;
} vault_tpm_lockout_state;

/// Reads the dictionary-attack state.
vault_tpm_status vault_tpm_lockout(vault_tpm *tpm, vault_tpm_lockout_state *state);

/// Changes the lockout hierarchy's authorization value from `current` to `new_auth` (each
/// at most VAULT_TPM_MAX_AUTH bytes, none when its length is 0), in a session salted to the
/// storage key that encrypts the new value. VAULT_TPM_AUTH_FAIL: `current` is not the
/// hierarchy's value (the TPM then refuses every one for its recovery time);
/// VAULT_TPM_LOCKOUT: it refuses every one now, after an earlier wrong one.
vault_tpm_status vault_tpm_change_lockout_auth(vault_tpm *tpm, const uint8_t *current, size_t current_length,
                                               const uint8_t *new_auth, size_t new_length);

/// TSS2's own words for a response code (from libtss2-rc when it is installed), or NULL.
const char *vault_tpm_describe(uint32_t rc);

#endif
