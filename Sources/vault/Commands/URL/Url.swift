import ArgumentParser
import Foundation
import VaultCore
import VaultNet

struct Url: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "url",
        abstract: "Handle a vault://x-callback-url/encrypt or decrypt request from another program.",
        discussion: """
            The result goes to the request's x-success URL (errors to x-error, a refusal to \
            x-cancel), printed on standard output, or opened with xdg-open (--open). Every \
            request is shown and must be confirmed on the terminal; without one, only sources on \
            the allowlist ('vault settings url-allow SOURCE') are served, and never with a locked \
            key. Give the URL as - to read it from standard input, which keeps data out of the \
            process list. Docs/URL.md has the parameters and error codes.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The request, or - to read it from standard input.", valueName: "url"))
    var url: String?

    @Flag(help: "Open the callback URL with xdg-open instead of printing it.")
    var open = false

    @Flag(help: "Register vault as the desktop's handler of vault:// URLs.")
    var installHandler = false

    @Flag(help: "Remove the desktop handler.")
    var uninstallHandler = false

    @OptionGroup var recovery: KeyRecoveryOptions

    func validate() throws {
        let modes = [url != nil, installHandler, uninstallHandler].filter { $0 }.count
        guard modes == 1 else { throw ValidationError("give a URL, --install-handler or --uninstall-handler") }
    }

    func run() async throws {
        if installHandler { return try DesktopHandler.install() }
        if uninstallHandler { return try DesktopHandler.uninstall() }
        let text = try url == "-" ? readRequest() : url!
        let request: CallbackRequest
        do {
            request = try CallbackRequest(parsing: text)
        } catch {
            // Nothing in a URL that does not parse can be trusted, its callbacks included.
            throw CLIError.invalidInput("\(error)")
        }
        let keystore = try home.openKeystore()
        let handler = URLRequestHandler(request: request, keystore: keystore, keys: keys, recovery: recovery)
        let outcome = await handler.handle()
        try deliver(outcome, for: request)
    }

    private func readRequest() throws -> String {
        var input = FileSource(standardInput: ())
        let bytes = try input.readFully(CallbackRequest.maximumLength + 1)
        guard bytes.count <= CallbackRequest.maximumLength else { throw CLIError.invalidInput("the request is too long") }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw CLIError.invalidInput("the request is not UTF-8") }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Sends the outcome to its callback (printed, or opened), then reports it as the exit
    /// status: 0 success, 1 failure, 2 declined.
    private func deliver(_ outcome: URLOutcome, for request: CallbackRequest) throws {
        switch outcome {
        case .success(let results):
            if let success = request["x-success"] {
                try send(CallbackURL.appending(results, to: success))
            } else {
                print(results.map { "\(CallbackURL.encode($0.0))=\(CallbackURL.encode($0.1))" }.joined(separator: "&"))
            }
        case .failure(let code, let message):
            if let error = request["x-error"] {
                try send(CallbackURL.appending([("errorCode", String(code.rawValue)), ("errorMessage", message)], to: error))
            }
            throw CLIError.invalidInput("\(message) (errorCode \(code.rawValue))")
        case .cancelled:
            if let cancel = request["x-cancel"] {
                try send(cancel)
            } else if let error = request["x-error"] {
                let code = URLErrorCode.declined
                try send(CallbackURL.appending([("errorCode", String(code.rawValue)), ("errorMessage", code.message)], to: error))
            }
            throw CLIError.cancelled
        }
    }

    private func send(_ callback: String) throws {
        guard open else { return print(callback) }
        if let problem = DesktopHandler.open(callback) {
            Terminal.standardError("vault: warning: cannot open the callback (\(problem)); it follows on standard output")
            print(callback)
        }
    }
}

/// The documented error codes (Docs/URL.md).
enum URLErrorCode: Int {
    case missingParameter = 1, badBase64, unknownAction, unknownKey, keyLocked, declined, scryptNOutOfRange, decryptionFailed,
         confirmationRequired, invalidParameter, passwordRequired, failed

    var message: String {
        switch self {
        case .missingParameter: "a required parameter is missing"
        case .badBase64: "a parameter is not valid base64"
        case .unknownAction: "unknown action"
        case .unknownKey: "unknown key"
        case .keyLocked: "the key is locked and could not be unlocked"
        case .declined: "the user declined"
        case .scryptNOutOfRange: "scryptN is out of range"
        case .decryptionFailed: "decryption failed"
        case .confirmationRequired: "confirmation required"
        case .invalidParameter: "a parameter has an invalid value"
        case .passwordRequired: "a password is needed and there is no terminal to ask for it"
        case .failed: "the request failed"
        }
    }
}

enum URLOutcome {
    case success([(String, String)])
    case failure(URLErrorCode, String)
    case cancelled
}

private struct URLFailure: Error {
    let code: URLErrorCode
    let message: String

    init(_ code: URLErrorCode, _ detail: String? = nil) {
        self.code = code
        message = detail.map { "\(code.message): \($0)" } ?? code.message
    }
}

private struct URLCancelled: Error {}

/// Carries out one request. Every way it can end is an ``URLOutcome``.
struct URLRequestHandler {
    let request: CallbackRequest
    let keystore: Keystore
    let keys: PassphraseOption
    let recovery: KeyRecoveryOptions

    /// The largest decoded data a request carries: 64 MiB.
    static let maximumData = 64 << 20

    func handle() async -> URLOutcome {
        do {
            switch request.action {
            case "encrypt": return .success(try await encrypt())
            case "decrypt": return .success(try await decrypt())
            default: throw URLFailure(.unknownAction, "'\(request.action)'; vault knows encrypt and decrypt")
            }
        } catch let failure as URLFailure {
            return .failure(failure.code, failure.message)
        } catch is URLCancelled {
            return .cancelled
        } catch CLIError.cancelled {
            return .cancelled
        } catch let error as VaultError {
            return .failure(.failed, error.description)
        } catch {
            return .failure(.failed, "\(error)")
        }
    }

    private func encrypt() async throws -> [(String, String)] {
        guard let plaintext = request["plaintext"] else { throw URLFailure(.missingParameter, "plaintext") }
        let store = try flag("store"), addPassword = try flag("addPassword")
        var scrypt: ScryptParameters?
        if let text = request["scryptN"] {
            guard addPassword else { throw URLFailure(.invalidParameter, "scryptN is only valid with addPassword=1") }
            guard let n = UInt64(text) else { throw URLFailure(.invalidParameter, "scryptN is not an integer") }
            do { scrypt = try ScryptParameters(n: n) } catch { throw URLFailure(.scryptNOutOfRange, "32768 ≤ N ≤ 4194304, a power of two") }
        }
        let filename = request["filename"]
        var content = filename == nil ? Array(plaintext.utf8) : try base64(plaintext, "plaintext")
        defer { content.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
        guard content.count <= Self.maximumData else { throw URLFailure(.invalidParameter, "plaintext is larger than 64 MiB") }
        let description = request["description"] ?? ""
        let agent = await AgentClient.connect(home: keystore.home)
        let holding = try await chooseKey(agent: agent)
        try confirm([
            "request      encrypt \(filename.map { "the file '\($0)'" } ?? "a note") of \(content.count) bytes",
            "key          \(holding.displayName)",
            "description  \(description.isEmpty ? "-" : description) (public)",
            "store        \(store ? "yes, also in this keystore" : "no")",
        ] + (addPassword ? ["password     a password layer, asked next"] : []))
        var password: SecureBytes?
        if addPassword {
            guard Terminal.isAvailable else { throw URLFailure(.passwordRequired) }
            password = try Terminal.passphrase(prompt: "Password for the item: ", confirm: true)
            if scrypt == nil { scrypt = try askScrypt() }
        }
        let header = try ItemHeader(keyID: holding.keyID, type: filename == nil ? .note : .file, passwordProtected: addPassword,
                                    title: "", description: description)
        let itemKey = try await itemKey(for: header, holding: holding, agent: agent)
        var source = BytesSource(content)
        let export = try ItemCrypto.export(header, metadata: SecretMetadata(fileName: filename), content: &source, itemKey: itemKey,
                                           password: password, scrypt: scrypt ?? .default)
        if store { try keep(export, key: itemKey) }
        Terminal.standardError("vault url: encrypted \(content.count) bytes for \(requester) under key '\(holding.displayName)'")
        return [("encryptedData", Data(export).base64EncodedString())]
    }

    private func decrypt() async throws -> [(String, String)] {
        guard let data = request["encryptedData"] else { throw URLFailure(.missingParameter, "encryptedData") }
        let store = try flag("store")
        let export = try base64(data, "encryptedData")
        guard export.count <= Self.maximumData * 2 else { throw URLFailure(.invalidParameter, "encryptedData is too large") }
        var input = BytesSource(export)
        let header: ItemHeader, streamLength: UInt64
        do {
            (header, streamLength) = try ItemCrypto.readHeader(&input)
        } catch let error as VaultError {
            throw URLFailure(.decryptionFailed, error.description)
        }
        guard let holding = try keystore.sharedKey(id: header.keyID) else {
            throw URLFailure(.unknownKey, "you hold no share of key \(header.keyID.hex.prefix(16))")
        }
        let agent = await AgentClient.connect(home: keystore.home)
        try confirm([
            "request      decrypt a \(header.type)\(header.title.isEmpty ? "" : " '\(header.title)'")\(header.description.isEmpty ? "" : " (\(header.description))")",
            "key          \(holding.displayName)",
            "store        \(store ? "yes, also in this keystore" : "no")",
            "the plaintext goes to the requesting program",
        ])
        let itemKey = try await itemKey(for: header, holding: holding, agent: agent)
        var content: [UInt8] = []
        defer { content.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
        let metadata: SecretMetadata
        do {
            metadata = try ItemCrypto.open(header, streamLength: streamLength, source: &input, itemKey: itemKey, password: {
                guard Terminal.isAvailable else { throw URLFailure(.passwordRequired) }
                return try Terminal.passphrase(prompt: "Password for the item: ")
            }) { bytes in
                guard content.count + bytes.count <= Self.maximumData else { throw URLFailure(.invalidParameter, "the plaintext is larger than 64 MiB") }
                content += bytes
            }
        } catch let error as VaultError {
            throw URLFailure(.decryptionFailed, error.description)
        }
        if store { try keep(export, key: itemKey) }
        Terminal.standardError("vault url: decrypted item \(header.itemIDHex.prefix(16)) for \(requester) with key '\(holding.displayName)'")
        var results: [(String, String)] = []
        if let name = metadata.fileName {
            results.append(("plaintext", Data(content).base64EncodedString()))
            results.append(("description", header.description))
            results.append(("filename", name))
        } else {
            results.append(("plaintext", String(decoding: content, as: UTF8.self)))
            results.append(("description", header.description))
        }
        return results
    }

    private var requester: String { request["x-source"].map { "'\($0)'" } ?? "an unnamed program" }

    /// `0` or `1`, absent meaning 0.
    private func flag(_ name: String) throws -> Bool {
        switch request[name] {
        case nil, "0": return false
        case "1": return true
        default: throw URLFailure(.invalidParameter, "\(name) takes 0 or 1")
        }
    }

    /// Standard base64 (`+/`, padded), strictly.
    private func base64(_ text: String, _ name: String) throws -> [UInt8] {
        guard let data = Data(base64Encoded: text), data.base64EncodedString() == text else { throw URLFailure(.badBase64, name) }
        return [UInt8](data)
    }

    /// The key named by `key`, or one the user picks among the unlocked keys.
    private func chooseKey(agent: AgentClient?) async throws -> KeyHolding {
        if let name = request["key"] {
            do { return try keystore.sharedKey(matching: name) } catch { throw URLFailure(.unknownKey, "\(error)") }
        }
        var unlocked = Set<[UInt8]>()
        if let agent {
            for entry in try await agent.status() { unlocked.insert(entry.keyID) }
        }
        let candidates = try keystore.sharedKeys().filter { unlocked.contains($0.keyID) }
        guard !candidates.isEmpty else { throw URLFailure(.missingParameter, "key (no key is unlocked to choose from)") }
        guard Terminal.isAvailable else {
            if candidates.count == 1 { return candidates[0] }
            throw URLFailure(.missingParameter, "key (more than one key is unlocked)")
        }
        for (number, key) in candidates.enumerated() { Terminal.standardError("  \(number + 1)  \(key.displayName)") }
        guard let answer = Terminal.ask("Encrypt with which key? [1-\(candidates.count)] "), let number = Int(answer),
              candidates.indices.contains(number - 1) else { throw URLCancelled() }
        return candidates[number - 1]
    }

    /// Shows the request and asks; without a terminal, only an allowlisted source passes.
    private func confirm(_ details: [String]) throws {
        let source = request["x-source"]
        guard Terminal.isAvailable else {
            guard let source, try keystore.isURLSourceAllowed(source) else {
                throw URLFailure(.confirmationRequired, "no terminal to confirm on, and \(requester) is not on the allowlist")
            }
            return
        }
        guard try Terminal.confirm("Allow this request from \(requester)?", details: ["from         \(source ?? "an unnamed program")"] + details,
                                   what: "a vault:// request") else { throw URLCancelled() }
    }

    private func askScrypt() throws -> ScryptParameters {
        let answer = Terminal.ask("scrypt N for the password (32768 to 4194304) [32768]: ") ?? ""
        guard !answer.isEmpty else { return .default }
        guard let n = UInt64(answer), let parameters = try? ScryptParameters(n: n) else {
            throw URLFailure(.scryptNOutOfRange, "32768 ≤ N ≤ 4194304, a power of two")
        }
        return parameters
    }

    /// The item key: from the agent, or, with a terminal (the user has just confirmed),
    /// by recovering the key, which then goes to the agent for 15 minutes. Without a
    /// terminal a locked key stays locked: no program gets a plaintext the user did not unlock.
    private func itemKey(for header: ItemHeader, holding: KeyHolding, agent: AgentClient?) async throws -> SecureBytes {
        if let key = try await agent?.itemKey(keyID: holding.keyID, headerHash: SharedKey.headerHash(header)) { return key }
        guard Terminal.isAvailable else { throw URLFailure(.keyLocked, "'\(holding.displayName)'; unlock it with 'vault unlock'") }
        do {
            let identity = try keys.unlock(keystore)
            let key = try await recoverSharedKey(holding, keystore: keystore, identity: identity, options: recovery)
            if let agent { try await agent.unlock(keyID: holding.keyID, key: key, seconds: 15 * 60) }
            return SharedKey.itemKey(key, headerHash: SharedKey.headerHash(header))
        } catch let error as VaultError {
            throw URLFailure(.keyLocked, error.description)
        }
    }

    /// Stores the item as well (`store=1`); one already held stays as it is.
    private func keep(_ export: [UInt8], key: SecureBytes) throws {
        var input = BytesSource(export)
        do {
            let (header, length) = try keystore.readItemHeader(&input)
            let item = try keystore.importItem(header, streamLength: length, from: &input, key: key, markNew: false)
            Terminal.standardError("vault url: stored item \(item.header.itemIDHex.prefix(16))")
        } catch VaultError.duplicateItem {
            return
        }
    }
}
