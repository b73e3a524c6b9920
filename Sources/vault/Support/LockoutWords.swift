import VaultCore

/// What `init --tpm` and `passphrase` say of the TPM's lockout hierarchy, once the keys are
/// stored: one line when something changed or was left to its owner, a warning when the
/// TPM did not go along.
enum LockoutWords {
    static func tell(_ change: TPMLockoutChange) {
        switch change {
        case .untouched, .kept:
            return
        case .taken:
            Terminal.standardError("vault gave the TPM's lockout hierarchy a random authorization, kept sealed with the keys under the PIN: "
                + "nobody can reset the PIN's guess limit now ('vault passphrase --no-tpm' gives it back)")
        case .leftAsItWas:
            Terminal.standardError("the TPM's lockout hierarchy has an authorization already (its owner's, or another program's): "
                + "vault leaves it as it is, and the PIN's guess limit is as safe as that authorization")
        case .givenBack:
            Terminal.standardError("the TPM's lockout hierarchy has no authorization again, as vault found it")
        case .notGivenBack:
            Terminal.standardError("vault: warning: the TPM's lockout authorization is no longer the one vault set, so vault left it as it is")
        case .notTaken(let error):
            Terminal.standardError("vault: warning: the TPM did not take a lockout authorization (\(error)): anyone with this machine "
                + "can still reset the PIN's guess limit; 'vault passphrase --tpm' tries again")
        }
    }
}
