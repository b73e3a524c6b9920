import ArgumentParser
import VaultCore

/// A new TPM PIN: from the first line of a file, or asked twice on the terminal; checked
/// against ``PINRules``.
enum NewPIN {
    static func read(file: String?) throws -> SecureBytes {
        let pin: SecureBytes
        if let file {
            pin = try PassphraseFile.read(file, what: "PIN")
        } else {
            do {
                pin = try Terminal.passphrase(prompt: "New TPM PIN: ", confirm: true)
            } catch CLIError.noTerminal {
                throw CLIError.noTerminal(purpose: "a PIN", alternative: "pass --pin-file FILE, or --no-pin to seal the keys without one")
            }
        }
        try PINRules.check(pin)
        return pin
    }

    /// The PCRs of `--tpm-pcrs`, or none.
    static func pcrs(_ text: String?) throws -> PCRSelection {
        try text.map { try PCRSelection(parsing: $0) } ?? .none
    }

    /// `--tpm-pcrs` checked as the command line is: a bad list is a usage error.
    static func validated(_ text: String?) throws -> PCRSelection {
        do {
            return try pcrs(text)
        } catch let error as VaultError {
            throw ValidationError("--tpm-pcrs: \(error)")
        }
    }

    /// Warns that keys sealed without a PIN open for anyone running programs as this user.
    static func warnWithoutPIN() {
        Terminal.standardError("vault: warning: the private keys are sealed by the TPM without a PIN: anyone who can run programs as you "
            + "on this machine can use them (a copy of the keystore opens nowhere else)")
    }
}
