/// How the identity's private keys are protected at rest, as `vault id` and `vault secrets
/// show` tell it: by nothing but the file's mode, by a passphrase, or sealed by this
/// machine's TPM (with a PIN, PCRs, a passphrase as well).
public struct KeyProtection: Sendable, Equatable, CustomStringConvertible {
    /// The scrypt parameters of the passphrase, when one is needed.
    public let passphrase: ScryptParameters?
    /// The TPM's part, when the keys are sealed by it.
    public let tpm: TPMProtection?

    /// What the TPM's seal asks for.
    public struct TPMProtection: Sendable, Equatable {
        /// Whether a PIN is needed (checked by the TPM, with its lockout).
        public let pin: Bool
        /// The PCRs the keys are bound to (none: not bound to the boot state).
        public let pcrs: PCRSelection
    }

    /// Whether anything but the file's mode protects the keys.
    public var isProtected: Bool { passphrase != nil || tpm != nil }

    /// In words, to follow "private keys": "sealed by this machine's TPM, with a PIN, bound
    /// to PCR 7, and a passphrase (scrypt N = 32768)", "protected by a passphrase (…)",
    /// "unprotected: …".
    public var description: String {
        guard let tpm else {
            return passphrase.map { "protected by a passphrase (scrypt N = \($0.n))" } ?? "unprotected: anyone who can read the keystore file can use them"
        }
        var parts = ["sealed by this machine's TPM"]
        parts.append(tpm.pin ? "with a PIN" : "without a PIN")
        if tpm.pcrs != .none { parts.append("bound to PCR \(tpm.pcrs)") }
        if let passphrase { parts.append("and a passphrase (scrypt N = \(passphrase.n))") }
        return parts.joined(separator: ", ")
    }
}

/// How new keys are to be protected: a passphrase, the TPM, or both.
public struct NewKeyProtection {
    /// The passphrase (alone, or as well as the TPM), or nil.
    public var passphrase: SecureBytes?
    /// Its scrypt cost.
    public var scrypt: ScryptParameters
    /// Sealing by the TPM, or nil.
    public var tpm: TPMSealing?

    public init(passphrase: SecureBytes?, scrypt: ScryptParameters = .default, tpm: TPMSealing? = nil) {
        (self.passphrase, self.scrypt, self.tpm) = (passphrase, scrypt, tpm)
    }
}

/// Sealing by the TPM: which TPM, the PIN (nil for none) and the PCRs of the policy.
public struct TPMSealing {
    public var selection: TPMSelection
    public var pin: SecureBytes?
    public var pcrs: PCRSelection

    public init(selection: TPMSelection, pin: SecureBytes?, pcrs: PCRSelection = .none) {
        (self.selection, self.pin, self.pcrs) = (selection, pin, pcrs)
    }
}

/// What the user gave to open the keys: the passphrase, the PIN, and the TPM to ask.
public struct UnlockFactors {
    public var passphrase: SecureBytes?
    public var pin: SecureBytes?
    /// The TPM, when the keys are sealed by one (nil: `VAULT_TPM` or the default device).
    public var tpm: TPMSelection?

    public init(passphrase: SecureBytes? = nil, pin: SecureBytes? = nil, tpm: TPMSelection? = nil) {
        (self.passphrase, self.pin, self.tpm) = (passphrase, pin, tpm)
    }
}

/// What a new protection of the keys did with the TPM's lockout hierarchy, whose
/// authorization guards the PIN's guess limit (Docs/CLI.md, "Keys bound to this machine").
public enum TPMLockoutChange: Sendable, Equatable {
    /// Nothing: no PIN for the lockout to guard, before or after.
    case untouched
    /// The hierarchy had no authorization: vault gave it a random one, which the keystore
    /// keeps sealed under the PIN.
    case taken
    /// vault keeps the authorization it set before, sealed again with the keys.
    case kept
    /// The hierarchy has an authorization vault did not set (its owner's, or another
    /// program's): left as it was.
    case leftAsItWas
    /// vault's authorization is taken off again: the hierarchy has none, as before.
    case givenBack
    /// The TPM refused vault's authorization, so the hierarchy has another now: left as it
    /// is, and vault's forgotten.
    case notGivenBack
    /// The keystore keeps a new authorization, but the TPM did not take it (the error says
    /// why): the guess limit stays unguarded until the keys are sealed again.
    case notTaken(VaultError)
}

/// The rules of a new PIN: the TPM's lockout, not its length, stops guessing; still, the
/// lockout forgets a failure every interval (2 hours on many PCs, after 32 tries), so a
/// thief who keeps the machine a month gets some 400 tries: 4% of the 4-digit PINs, 0.04%
/// of the 6-digit ones (security review M1). A PIN is typed, so it is a line of text.
public enum PINRules {
    /// The fewest characters a new PIN may have.
    public static let shortest = 6
    /// The most bytes a PIN may have.
    public static let longest = 1024

    /// Checks a new PIN.
    public static func check(_ pin: SecureBytes) throws(VaultError) {
        let characters = pin.withUnsafeBytes { $0.reduce(0) { $0 + ($1 & 0xC0 == 0x80 ? 0 : 1) } }
        guard characters >= shortest else { throw .invalidPIN("a PIN has at least \(shortest) characters") }
        guard pin.count <= longest else { throw .invalidPIN("a PIN has at most \(longest) bytes") }
    }
}
