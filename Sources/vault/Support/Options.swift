import ArgumentParser
import Foundation
import VaultCore

/// `--home`, shared by every command that touches the keystore.
struct HomeOption: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "The keystore directory.",
        discussion: "Default: $VAULT_HOME, else $XDG_DATA_HOME/vault, else ~/.local/share/vault.",
        valueName: "dir"))
    var home: String?

    var vaultHome: VaultHome { VaultHome.resolve(explicit: home) }

    func openKeystore() throws -> Keystore { try Keystore.open(home: vaultHome) }
}

/// `--passphrase-file` and `--pin-file`, for commands that open the private keys.
struct PassphraseOption: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Read the keystore passphrase from the first line of this file instead of the terminal.",
        valueName: "file"))
    var passphraseFile: String?

    @Option(name: .long, help: ArgumentHelp(
        "Read the TPM PIN from the first line of this file instead of the terminal (keys sealed by the TPM with a PIN).",
        valueName: "file"))
    var pinFile: String?

    /// The passphrase for `info`'s keys: nil when they are not protected by one.
    func passphrase(for info: IdentityInfo) throws -> SecureBytes? {
        guard info.isPassphraseProtected else { return nil }
        if let passphraseFile { return try PassphraseFile.read(passphraseFile) }
        do {
            return try Terminal.passphrase(prompt: "Passphrase for \(info.label): ")
        } catch CLIError.noTerminal {
            throw VaultError.passphraseRequired
        }
    }

    /// The TPM PIN for `info`'s keys: nil when they need none.
    func pin(for info: IdentityInfo) throws -> SecureBytes? {
        guard info.needsPIN else { return nil }
        if let pinFile { return try PassphraseFile.read(pinFile, what: "PIN") }
        do {
            return try Terminal.passphrase(prompt: "TPM PIN for \(info.label): ")
        } catch CLIError.noTerminal {
            throw VaultError.pinRequired
        }
    }

    /// Opens the private keys, asking for the passphrase when they are protected.
    func unlock(_ keystore: Keystore) throws -> Identity {
        try open(keystore).identity
    }

    /// What opened the keys: the identity, and the passphrase and PIN given (nil when not
    /// needed), for a command that seals the keys again.
    struct Opened {
        let identity: Identity
        let passphrase: SecureBytes?
        let pin: SecureBytes?
    }

    /// Opens the private keys: the PIN first when the TPM seals them, then the passphrase.
    /// On the terminal a wrong passphrase or PIN is asked again, up to
    /// ``PassphraseRules/tries`` times in all, as sudo does: a typing slip should not cost
    /// the whole command. From a file each is tried once. A wrong PIN is asked again only
    /// while the TPM has tries left, and says how many: each one counts toward its lockout.
    func open(_ keystore: Keystore) throws -> Opened {
        let info = try keystore.identityInfo()
        let selection = info.protection.tpm == nil ? nil : try TPMSelection.fromEnvironment()
        var pin: SecureBytes?, passphrase: SecureBytes?
        for attempt in 1...PassphraseRules.tries {
            if pin == nil { pin = try self.pin(for: info) }
            if passphrase == nil { passphrase = try self.passphrase(for: info) }
            do {
                let identity = try keystore.unlock(UnlockFactors(passphrase: passphrase, pin: pin, tpm: selection))
                return Opened(identity: identity, passphrase: passphrase, pin: pin)
            } catch {
                guard attempt < PassphraseRules.tries else { throw error }
                switch error {
                case .wrongPassphrase where info.isPassphraseProtected && passphraseFile == nil:
                    Terminal.tell("Wrong passphrase; try again.")
                    passphrase = nil
                case .wrongPIN(let left, _) where info.needsPIN && pinFile == nil && left != 0:
                    Terminal.tell("Wrong PIN" + (left.map { " (\($0) tr\($0 == 1 ? "y" : "ies") left before the TPM locks out)" } ?? "") + "; try again.")
                    pin = nil
                default:
                    throw error
                }
            }
        }
        throw VaultError.wrongPassphrase
    }

    /// The identity that signs a change to the items of `keyID` when that key is synced
    /// (`vault key sync`), else nil: an unsynced key's items need no signature, and so no
    /// passphrase.
    func author(_ keystore: Keystore, keyID: [UInt8]) throws -> Identity? {
        try keystore.syncGroup(keyID: keyID) == nil ? nil : unlock(keystore)
    }
}

/// `--scrypt-n`, the cost of a new passphrase seal.
struct ScryptOption: ParsableArguments {
    @Option(name: .customLong("scrypt-n"), help: ArgumentHelp(
        "scrypt cost N for a new passphrase: a power of two from 32768 (the default) to 4194304.",
        valueName: "n"))
    var n: UInt64?

    func parameters() throws -> ScryptParameters {
        try n.map { try ScryptParameters(n: $0) } ?? .default
    }
}

/// `--password`, `--password-file` and `--scrypt-n`: an optional password layer for a new
/// secret or item.
struct PasswordLayerOptions: ParsableArguments {
    @Flag(help: "Add a password layer, asked twice on the terminal.")
    var password = false

    @Option(help: ArgumentHelp("Add a password layer with the password on the first line of this file.", valueName: "file"))
    var passwordFile: String?

    @OptionGroup var scrypt: ScryptOption

    func validate() throws {
        if password && passwordFile != nil { throw ValidationError("--password and --password-file exclude each other") }
        if scrypt.n != nil && !password && passwordFile == nil { throw ValidationError("--scrypt-n needs --password or --password-file") }
    }

    /// The password, if a layer was asked for (from the file, else twice on the terminal).
    func read(prompt: String) throws -> SecureBytes? {
        if let passwordFile {
            let password = try PassphraseFile.read(passwordFile, what: "password")
            PassphraseRules.warnIfShort(password, from: passwordFile, guarding: PassphraseRules.passwordLayer)
            return password
        }
        return password ? try Terminal.passphrase(prompt: prompt, confirm: true, guarding: PassphraseRules.passwordLayer) : nil
    }
}

/// Asks for an existing password layer's password when recovery reaches it: from the
/// first line of `file`, else on the terminal; without either, `passwordRequired`.
func layerPassword(file: String?, prompt: String) -> () throws -> SecureBytes {
    {
        if let file { return try PassphraseFile.read(file, what: "password") }
        do {
            return try Terminal.passphrase(prompt: prompt)
        } catch CLIError.noTerminal {
            throw VaultError.passwordRequired
        }
    }
}

/// ``layerPassword(file:prompt:)`` with `file` read now, before anything is asked: a
/// password file that is missing fails at once, not after the passphrase and the pieces.
func layerPasswordReadingFirst(file: String?, prompt: String) throws -> () throws -> SecureBytes {
    guard let file else { return layerPassword(file: nil, prompt: prompt) }
    let password = try PassphraseFile.read(file, what: "password")
    return { password }
}

/// JSON on stdout with stable key order.
func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    let data = try encoder.encode(value)
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

/// Writes a new file; refuses to replace an existing one.
func writeNewFile(_ path: String, _ bytes: [UInt8]) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    guard fd >= 0 else {
        if errno == EEXIST { throw VaultError.fileExists(path: path) }
        throw VaultError.fileSystem(path: path, reason: String(cString: strerror(errno)))
    }
    var written = 0
    while written < bytes.count {
        let count = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            unlink(path)
            throw VaultError.fileSystem(path: path, reason: reason)
        }
        written += count
    }
    guard close(fd) == 0 else {
        unlink(path)
        throw VaultError.fileSystem(path: path, reason: String(cString: strerror(errno)))
    }
}

/// The encrypted fields of passwords and contacts: as options, or from `--fields FILE|-`,
/// which keeps them off the command line (every local user can read a process's
/// arguments, in /proc/PID/cmdline, while it runs).
struct SecretFieldOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Read the fields from this file (- for standard input): lines 'username: …', 'url: …', 'name: …', "
                               + "'phone: …', 'email: …', 'address: …'. Unlike the options below, not visible to other local users.",
                               valueName: "file"))
    var fields: String?

    @Option(help: ArgumentHelp("A password's username.", valueName: "name"))
    var username: String?

    @Option(help: ArgumentHelp("A password's URL.", valueName: "url"))
    var url: String?

    @Option(help: ArgumentHelp("A contact's name.", valueName: "name"))
    var contactName: String?

    @Option(help: ArgumentHelp("A contact's phone number (repeatable).", valueName: "number"))
    var phone: [String] = []

    @Option(help: ArgumentHelp("A contact's email address (repeatable).", valueName: "address"))
    var email: [String] = []

    @Option(help: ArgumentHelp("A contact's postal address.", valueName: "text"))
    var address: String?

    func metadata(for type: SecretType, file: String?) throws -> SecretMetadata {
        var username = username, url = url, contactName = contactName, address = address
        var phones = phone, emails = email
        if let fields {
            // Standard input carries a note's, a file's or a password's content when no FILE
            // (or -) is given for it; a contact without FILE has none.
            let contentFromStandardInput = switch type {
            case .key: false
            case .contact: file == "-"
            case .password: file == "-"
            default: file == nil || file == "-"
            }
            if fields == "-" && contentFromStandardInput {
                throw ValidationError("--fields - and the content cannot both come from standard input: give one of them as a FILE")
            }
            func once(_ slot: inout String?, _ name: String, _ value: String) throws {
                guard slot == nil else { throw ValidationError("the \(name) is given twice") }
                slot = value
            }
            for (name, value) in try FieldsFile.read(fields) {
                switch name {
                case "username": try once(&username, "username", value)
                case "url": try once(&url, "url", value)
                case "name": try once(&contactName, "contact's name", value)
                case "address": try once(&address, "address", value)
                case "phone": phones.append(value)
                default: emails.append(value)
                }
            }
        }
        let passwordFields = username != nil || url != nil
        let contactFields = contactName != nil || !phones.isEmpty || !emails.isEmpty || address != nil
        if passwordFields && type != .password { throw ValidationError("username and url fields go with --type password") }
        if contactFields && type != .contact { throw ValidationError("contact fields go with --type contact") }
        if type == .contact && contactName == nil { throw ValidationError("--type contact needs a name (--contact-name, or name: in --fields)") }
        var metadata = SecretMetadata(username: username, url: url, contactName: contactName, phones: phones,
                                      emails: emails, address: address)
        if type == .file, let file { metadata.fileName = (file as NSString).lastPathComponent }
        return metadata
    }
}

/// `--quiet`, for commands that show progress on a terminal.
struct ProgressOption: ParsableArguments {
    @Flag(name: .shortAndLong, help: "Show no progress line (it is shown only on a terminal, for work that lasts over half a second).")
    var quiet = false

    // Validation runs once, before the command: the one place every command with this
    // option passes through, so no command can forget to honour it.
    func validate() throws {
        if quiet { ProgressLine.isEnabled = false }
    }
}
