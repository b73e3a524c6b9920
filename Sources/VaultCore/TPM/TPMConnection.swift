import CVaultTPM
import Foundation

/// A connection to the TPM, open for one unlock or one sealing and closed at once: the
/// resource manager shares the TPM between processes, and a software TPM's socket takes
/// one client at a time.
final class TPMConnection {
    let selection: TPMSelection
    private let handle: OpaquePointer

    /// Connects to the TPM `selection` names, saying plainly why not: tpm2-tss missing, no
    /// TPM, no access to it.
    init(_ selection: TPMSelection) throws(VaultError) {
        // The library first: without it, whether a TPM is there does not matter yet.
        try Self.check(vault_tpm_load(), selection: selection)
        if let path = selection.devicePath {
            // tpm2-tss says only "IO failure" for both of these.
            var info = stat()
            guard stat(path, &info) == 0 else {
                throw errno == ENOENT ? .noTPM("\(path) does not exist") : .noTPM("\(path): \(String(cString: strerror(errno)))")
            }
            guard access(path, R_OK | W_OK) == 0 else { throw .tpmAccessDenied(path: path) }
        }
        var handle: OpaquePointer?
        let status = vault_tpm_open(selection.tcti, &handle)
        try Self.check(status, selection: selection)
        guard let handle else { throw .unexpected("vault_tpm_open returned no connection") }
        self.selection = selection
        self.handle = handle
    }

    deinit { vault_tpm_close(handle) }

    /// What sealing returns: the object, and the PCR values its policy holds.
    struct Sealed {
        let parentName: [UInt8]
        let pcrValues: [[UInt8]]
        let publicPart: [UInt8]
        let privatePart: [UInt8]
    }

    /// Seals `secret` (at most 128 bytes) with `auth` as the object's authorization value,
    /// and a policy on `pcrs` when there are any.
    func seal(_ secret: SecureBytes, auth: SecureBytes?, pcrs: PCRSelection) throws(VaultError) -> Sealed {
        var name = [UInt8](repeating: 0, count: Int(VAULT_TPM_NAME_LENGTH))
        var values = [UInt8](repeating: 0, count: 32 * Int(VAULT_TPM_PCRS))
        var publicPart = [UInt8](repeating: 0, count: Int(VAULT_TPM_BLOB_CAPACITY))
        var privatePart = [UInt8](repeating: 0, count: Int(VAULT_TPM_BLOB_CAPACITY))
        var publicLength = publicPart.count, privateLength = privatePart.count
        let status = secret.withUnsafeBytes { secretBytes in
            Self.withAuth(auth) { authBytes in
                vault_tpm_seal(handle, secretBytes.bindMemory(to: UInt8.self).baseAddress, secretBytes.count,
                               authBytes.bindMemory(to: UInt8.self).baseAddress, authBytes.count, pcrs.mask,
                               &name, &values, &publicPart, &publicLength, &privatePart, &privateLength)
            }
        }
        try Self.check(status, selection: selection)
        return Sealed(parentName: name, pcrValues: pcrs.indices.indices.map { Array(values[32 * $0..<32 * $0 + 32]) },
                      publicPart: Array(publicPart.prefix(publicLength)), privatePart: Array(privatePart.prefix(privateLength)))
    }

    /// Unseals `object` with `auth`, after checking that this TPM is the one that sealed it.
    /// A wrong PIN says how many tries are left; lockout, for how long; a policy that fails,
    /// which PCRs changed.
    func unseal(_ object: TPMSealedObject, auth: SecureBytes?) throws(VaultError) -> SecureBytes {
        let secret = SecureBytes(count: Int(VAULT_TPM_MAX_SECRET))
        var length = secret.count
        var found = [UInt8](repeating: 0, count: Int(VAULT_TPM_NAME_LENGTH))
        let status = secret.withUnsafeMutableBytes { out in
            Self.withAuth(auth) { authBytes in
                vault_tpm_unseal(handle, object.parentName, object.publicPart, object.publicPart.count,
                                 object.privatePart, object.privatePart.count,
                                 authBytes.bindMemory(to: UInt8.self).baseAddress, authBytes.count, object.pcrs.mask,
                                 &found, out.bindMemory(to: UInt8.self).baseAddress, &length)
            }
        }
        switch status.outcome {
        case VAULT_TPM_OK:
            return secret.slice(0..<length)
        case VAULT_TPM_OTHER_PARENT:
            throw .tpmOtherMachine
        case VAULT_TPM_AUTH_FAIL:
            let lockout = try? lockoutState()
            throw .wrongPIN(triesLeft: lockout.map { max(0, Int($0.max_failures) - Int($0.failures)) },
                            lockoutSeconds: lockout.map { Int($0.interval) })
        case VAULT_TPM_LOCKOUT:
            throw .tpmLockedOut(seconds: (try? lockoutState()).map { Int($0.interval) })
        case VAULT_TPM_POLICY_FAIL:
            let now = try? readPCRs(object.pcrs)
            let changed = zip(object.pcrs.indices, zip(object.pcrValues, now ?? object.pcrValues)).filter { $0.1.0 != $0.1.1 }.map(\.0)
            throw .tpmPCRsChanged(changed.isEmpty ? object.pcrs.indices : changed)
        case VAULT_TPM_BAD_OBJECT:
            throw .keystoreCorrupt("the TPM does not load the sealed keys (\(Self.words(status)))")
        default:
            try Self.check(status, selection: selection)
            throw .unexpected("vault_tpm_unseal")
        }
    }

    /// The SHA-256 values of `pcrs`, lowest first.
    func readPCRs(_ pcrs: PCRSelection) throws(VaultError) -> [[UInt8]] {
        var values = [UInt8](repeating: 0, count: 32 * Int(VAULT_TPM_PCRS))
        try Self.check(vault_tpm_read_pcrs(handle, pcrs.mask, &values), selection: selection)
        return pcrs.indices.indices.map { Array(values[32 * $0..<32 * $0 + 32]) }
    }

    /// The dictionary-attack state.
    func lockoutState() throws(VaultError) -> vault_tpm_lockout_state {
        var state = vault_tpm_lockout_state()
        try Self.check(vault_tpm_lockout(handle, &state), selection: selection)
        return state
    }

    /// What changing the lockout hierarchy's authorization came to.
    enum LockoutAuthorizationChange {
        case changed
        /// `current` is not the hierarchy's authorization: another was set since.
        case wrongAuthorization
    }

    /// Changes the lockout hierarchy's authorization from `current` to `new` (nil: none, for
    /// either). A wrong `current` is an answer, not an error; a TPM that refuses every
    /// lockout authorization for now (after a wrong one) throws.
    func changeLockoutAuthorization(from current: SecureBytes?, to new: SecureBytes?) throws(VaultError) -> LockoutAuthorizationChange {
        let status = Self.withAuth(current) { currentBytes in
            Self.withAuth(new) { newBytes in
                vault_tpm_change_lockout_auth(handle, currentBytes.bindMemory(to: UInt8.self).baseAddress, currentBytes.count,
                                              newBytes.bindMemory(to: UInt8.self).baseAddress, newBytes.count)
            }
        }
        switch status.outcome {
        case VAULT_TPM_OK: return .changed
        case VAULT_TPM_AUTH_FAIL: return .wrongAuthorization
        case VAULT_TPM_LOCKOUT: throw .tpmLockoutAuthorizationRefused(seconds: (try? lockoutState()).map { Int($0.recovery) })
        default:
            try Self.check(status, selection: selection)
            throw .unexpected("vault_tpm_change_lockout_auth")
        }
    }

    private static func withAuth<R>(_ auth: SecureBytes?, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        guard let auth else { return body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return auth.withUnsafeBytes(body)
    }

    /// Throws the error a failed status stands for.
    private static func check(_ status: vault_tpm_status, selection: TPMSelection) throws(VaultError) {
        switch status.outcome {
        case VAULT_TPM_OK: return
        case VAULT_TPM_NO_LIBRARY: throw .tpmLibraryMissing(detail(status))
        case VAULT_TPM_NO_CONNECTION: throw .noTPM("nothing answers at \(selection)")
        case VAULT_TPM_OWNER_AUTH: throw .tpmOwnerPassword
        case VAULT_TPM_LOCKOUT: throw .tpmLockedOut(seconds: nil)
        default: throw .tpm(words(status))
        }
    }

    private static func detail(_ status: vault_tpm_status) -> String {
        withUnsafeBytes(of: status.detail) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    /// The failed step and tpm2-tss's words for its code.
    private static func words(_ status: vault_tpm_status) -> String {
        let step = status.step.map { String(cString: $0) } ?? "?"
        let code = vault_tpm_describe(status.rc).map { String(cString: $0) } ?? String(format: "0x%x", status.rc)
        return "\(step): \(code)"
    }
}
