import ArgumentParser
import Foundation
import VaultCore

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create this machine's identity and keystore.",
        discussion: """
            The private keys are protected by a passphrase, asked twice on the terminal (or read \
            with --passphrase-file). --no-passphrase stores them unprotected: whoever copies the \
            keystore can then act as you, and collect what your peers release to you. \
            --tpm seals them by this machine's TPM 2.0 instead (VAULT_TPM names another than \
            /dev/tpmrm0): a copy of the keystore opens on no other machine. A PIN of at least 6 \
            characters is asked twice (--pin-file reads it, --no-pin goes without); the TPM \
            checks it and locks out after a few wrong ones, and so that nobody can reset that \
            limit, vault gives the TPM's lockout hierarchy a random authorization it keeps \
            sealed with the keys (one the machine's owner set is left as it is). A passphrase \
            is then needed as well only with --passphrase or --passphrase-file. --tpm-pcrs \
            binds the keys to the boot state: see 'Keys bound to this machine' in Docs/CLI.md \
            before using it.
            """)

    @OptionGroup var home: HomeOption

    @Option(help: ArgumentHelp("The identity's label (default: user@hostname).", valueName: "name"))
    var label: String?

    @Flag(help: "Protect the private keys with a passphrase, asked twice on the terminal (the default; with --tpm, needed as well as the TPM).")
    var passphrase = false

    @Flag(help: "Store the private keys without a passphrase (not recommended).")
    var noPassphrase = false

    @Option(help: ArgumentHelp("Protect the private keys with the passphrase on the first line of this file.",
                               valueName: "file"))
    var passphraseFile: String?

    @OptionGroup var scrypt: ScryptOption

    @Flag(help: "Seal the private keys by this machine's TPM 2.0: a copy of the keystore opens on no other machine.")
    var tpm = false

    @Option(help: ArgumentHelp("With --tpm: read the PIN from the first line of this file.", valueName: "file"))
    var pinFile: String?

    @Flag(help: "With --tpm: seal without a PIN (whoever runs programs as you on this machine can then use the keys).")
    var noPin = false

    @Option(name: .customLong("tpm-pcrs"), help: ArgumentHelp(
        "With --tpm: unseal only while these SHA-256 PCRs keep their values (e.g. 7, or 0,2,7); a firmware or boot change then locks the keys for good.",
        valueName: "list"))
    var tpmPCRs: String?

    @Flag(help: "Replace an existing identity. Peers stay trusted; they must import the new card.")
    var force = false

    func validate() throws {
        if passphrase && passphraseFile != nil {
            throw ValidationError("--passphrase and --passphrase-file exclude each other")
        }
        if noPassphrase && (passphrase || passphraseFile != nil) {
            throw ValidationError("--no-passphrase excludes --passphrase and --passphrase-file")
        }
        if scrypt.n != nil && noPassphrase {
            throw ValidationError("--scrypt-n needs a passphrase")
        }
        if !tpm && (pinFile != nil || noPin || tpmPCRs != nil) {
            throw ValidationError("--pin-file, --no-pin and --tpm-pcrs go with --tpm")
        }
        if noPin && pinFile != nil { throw ValidationError("--no-pin excludes --pin-file") }
        _ = try NewPIN.validated(tpmPCRs)
        if tpm && scrypt.n != nil && !passphrase && passphraseFile == nil {
            throw ValidationError("--scrypt-n needs a passphrase: with --tpm, add --passphrase or --passphrase-file")
        }
    }

    func run() throws {
        let label = try self.label.map { try Label($0) } ?? Label.machineDefault()
        let parameters = try scrypt.parameters()
        // Unprotected keys turn a copied keystore into this identity, so a passphrase is the
        // default and going without one is an explicit, warned choice.
        // With the TPM, the PIN comes first, and a passphrase only when asked for.
        var sealing: TPMSealing?
        if tpm {
            let selection = try TPMSelection.fromEnvironment()
            let pcrs = try NewPIN.pcrs(tpmPCRs)
            sealing = TPMSealing(selection: selection, pin: noPin ? nil : try NewPIN.read(file: pinFile), pcrs: pcrs)
        }
        let secret: SecureBytes? = if let passphraseFile {
            try PassphraseFile.read(passphraseFile)
        } else if noPassphrase || (tpm && !passphrase) {
            nil
        } else {
            try newPassphrase()
        }
        if let passphraseFile, let secret { PassphraseRules.warnIfShort(secret, from: passphraseFile, guarding: PassphraseRules.keystore) }
        let (keystore, lockout) = try Keystore.createIdentity(
            home: home.vaultHome, label: label, protection: NewKeyProtection(passphrase: secret, scrypt: parameters, tpm: sealing),
            force: force)
        // Said of keys stored, so only once they are (a refused init stores nothing).
        if noPassphrase && !tpm {
            Terminal.standardError("vault: warning: the private keys are stored without a passphrase; "
                + "anyone who copies \(home.vaultHome.keystorePath) can act as you ('vault passphrase' adds one)")
        }
        if tpm && noPin && secret == nil { NewPIN.warnWithoutPIN() }
        let info = try keystore.identityInfo()
        Terminal.standardError("created identity '\(info.label)' in \(keystore.home.keystorePath)")
        Terminal.standardError("fingerprint \(info.card.fingerprint)")
        if tpm { Terminal.standardError("private keys \(info.protection)") }
        LockoutWords.tell(lockout)
    }

    private func newPassphrase() throws -> SecureBytes {
        do {
            return try Terminal.passphrase(prompt: "New passphrase: ", confirm: true, guarding: PassphraseRules.keystore)
        } catch CLIError.noTerminal {
            throw CLIError.noTerminal(purpose: "a passphrase",
                                      alternative: "pass --passphrase-file FILE, or --no-passphrase to store the keys unprotected")
        }
    }
}
