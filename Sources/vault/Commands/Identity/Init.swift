import ArgumentParser
import Foundation
import VaultCore

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create this machine's identity and keystore.")

    @OptionGroup var home: HomeOption

    @Option(help: ArgumentHelp("The identity's label (default: user@hostname).", valueName: "name"))
    var label: String?

    @Flag(help: "Protect the private keys with a passphrase, asked twice on the terminal.")
    var passphrase = false

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
        if scrypt.n != nil && !passphrase && passphraseFile == nil {
            throw ValidationError("--scrypt-n needs --passphrase or --passphrase-file")
        }
    }

    func run() throws {
        let label = try self.label.map { try Label($0) } ?? Label.machineDefault()
        let parameters = try scrypt.parameters()
        let secret: SecureBytes? = if let passphraseFile {
            try PassphraseFile.read(passphraseFile)
        } else if passphrase {
            try Terminal.passphrase(prompt: "New passphrase: ", confirm: true)
        } else {
            nil
        }
        let keystore = try Keystore.create(
            home: home.vaultHome, label: label, passphrase: secret, scrypt: parameters, force: force)
        let info = try keystore.identityInfo()
        Terminal.standardError("created identity '\(info.label)' in \(keystore.home.keystorePath)")
        Terminal.standardError("fingerprint \(info.card.fingerprint)")
    }
}
