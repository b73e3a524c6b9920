import ArgumentParser
import Foundation
import VaultCore

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create this machine's identity and keystore.",
        discussion: """
            The private keys are protected by a passphrase, asked twice on the terminal (or read \
            with --passphrase-file). --no-passphrase stores them unprotected: whoever copies the \
            keystore can then act as you, and collect what your peers release to you.
            """)

    @OptionGroup var home: HomeOption

    @Option(help: ArgumentHelp("The identity's label (default: user@hostname).", valueName: "name"))
    var label: String?

    @Flag(help: "Protect the private keys with a passphrase, asked twice on the terminal (the default).")
    var passphrase = false

    @Flag(help: "Store the private keys without a passphrase (not recommended).")
    var noPassphrase = false

    @Option(help: ArgumentHelp("Protect the private keys with the passphrase on the first line of this file.",
                               valueName: "file"))
    var passphraseFile: String?

    @OptionGroup var scrypt: ScryptOption

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
    }

    func run() throws {
        let label = try self.label.map { try Label($0) } ?? Label.machineDefault()
        let parameters = try scrypt.parameters()
        // Unprotected keys turn a copied keystore into this identity, so a passphrase is the
        // default and going without one is an explicit, warned choice.
        let secret: SecureBytes? = if let passphraseFile {
            try PassphraseFile.read(passphraseFile)
        } else if noPassphrase {
            nil
        } else {
            try newPassphrase()
        }
        if let passphraseFile, let secret { PassphraseRules.warnIfShort(secret, from: passphraseFile, guarding: PassphraseRules.keystore) }
        if noPassphrase {
            Terminal.standardError("vault: warning: the private keys are stored without a passphrase; "
                + "anyone who copies \(home.vaultHome.keystorePath) can act as you ('vault passphrase' adds one)")
        }
        let keystore = try Keystore.create(
            home: home.vaultHome, label: label, passphrase: secret, scrypt: parameters, force: force)
        let info = try keystore.identityInfo()
        Terminal.standardError("created identity '\(info.label)' in \(keystore.home.keystorePath)")
        Terminal.standardError("fingerprint \(info.card.fingerprint)")
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
