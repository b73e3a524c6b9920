import ArgumentParser
import VaultCore

struct Passphrase: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Set, change or remove the passphrase that protects the private keys.")

    @OptionGroup var home: HomeOption
    @OptionGroup var current: PassphraseOption

    @Option(help: ArgumentHelp("Read the new passphrase from the first line of this file.", valueName: "file"))
    var newPassphraseFile: String?

    @Flag(help: "Store the private keys without a passphrase (protected by the file's 0600 mode only).")
    var remove = false

    @OptionGroup var scrypt: ScryptOption

    func validate() throws {
        if remove && (newPassphraseFile != nil || scrypt.n != nil) {
            throw ValidationError("--remove excludes --new-passphrase-file and --scrypt-n")
        }
    }

    func run() throws {
        let keystore = try home.openKeystore()
        // A new passphrase's file is read before the current passphrase is asked for.
        let fromFile = try newPassphraseFile.map { try PassphraseFile.read($0) }
        // Check the current passphrase before asking for a new one.
        let old = try current.open(keystore).passphrase
        let new: SecureBytes? = if remove {
            nil
        } else if let fromFile {
            fromFile
        } else {
            try Terminal.passphrase(prompt: "New passphrase: ", confirm: true, guarding: PassphraseRules.keystore)
        }
        if let newPassphraseFile, let new { PassphraseRules.warnIfShort(new, from: newPassphraseFile, guarding: PassphraseRules.keystore) }
        try keystore.changePassphrase(current: old, new: new, scrypt: scrypt.parameters())
        Terminal.standardError(new == nil ? "the private keys are no longer passphrase-protected"
                                          : "passphrase set")
    }
}
