import Foundation

/// The documented error codes of `vault://` requests (Docs/URL.md).
public enum URLErrorCode: Int, Sendable {
    case missingParameter = 1, badBase64, unknownAction, unknownKey, keyLocked, declined, scryptNOutOfRange, decryptionFailed,
         confirmationRequired, invalidParameter, passwordRequired, failed

    /// The code's message, as sent in `errorMessage`.
    public var message: String {
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

/// How a request ended.
public enum URLOutcome {
    /// The result parameters for `x-success`.
    case success([(String, String)])
    /// A documented failure, for `x-error`.
    case failure(URLErrorCode, String)
    /// The person said no, for `x-cancel`.
    case cancelled
}

/// What a request needs from the program that serves it: a person to ask, and keys.
public protocol URLRequestHost {
    /// Whether a person can be asked (a terminal is attached).
    var canAsk: Bool { get }
    /// Shows `details` and asks `question`; true to go on. Only called when ``canAsk``.
    func confirm(_ question: String, details: [String]) throws -> Bool
    /// Asks the person to pick one of `choices`; the index, or nil when they decline.
    func choose(_ question: String, among choices: [String]) -> Int?
    /// Asks a free-form answer; nil or empty for the default.
    func ask(_ question: String) -> String?
    /// Asks for a password, twice when `confirm`.
    func password(prompt: String, confirm: Bool) throws -> SecureBytes
    /// The ids of the shared keys unlocked in the agent.
    func unlockedKeyIDs() async throws -> Set<[UInt8]>
    /// The item key for `header` from the agent; nil when the key is locked.
    func unlockedItemKey(for header: ItemHeader, holding: KeyHolding) async throws -> SecureBytes?
    /// Recovers the shared key `holding` from its holders (only called when ``canAsk``,
    /// after the person confirmed), leaving it unlocked in the agent if one runs.
    func recoverKey(_ holding: KeyHolding) async throws -> SecureBytes
    /// One line for the log of what was done (never a secret).
    func note(_ line: String)
}

/// Carries out one `vault://x-callback-url/encrypt|decrypt` request. Every way it can end
/// is an ``URLOutcome``; the caller sends it to the request's callbacks.
public struct URLRequestHandler {
    let request: CallbackRequest
    let keystore: Keystore
    let host: any URLRequestHost

    /// The largest decoded data a request carries: 64 MiB.
    public static let maximumData = 64 << 20

    /// A handler of `request` for `keystore`'s keys, asking through `host`.
    public init(request: CallbackRequest, keystore: Keystore, host: any URLRequestHost) {
        self.request = request
        self.keystore = keystore
        self.host = host
    }

    /// Serves the request.
    public func handle() async -> URLOutcome {
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
        } catch let error as VaultError {
            return .failure(.failed, error.description)
        } catch {
            return .failure(.failed, VaultError.words(for: error))
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
        defer { content.wipe() }
        guard content.count <= Self.maximumData else { throw URLFailure(.invalidParameter, "plaintext is larger than 64 MiB") }
        let description = request["description"] ?? ""
        let holding = try await chooseKey()
        try confirm([
            "request      encrypt \(filename.map { "the file '\(TerminalText.escaped($0))'" } ?? "a note") of \(content.count) bytes",
            "key          \(TerminalText.escaped(holding.displayName))",
            "description  \(description.isEmpty ? "-" : TerminalText.escaped(description)) (public)",
            "store        \(store ? "yes, also in this keystore" : "no")",
        ] + (addPassword ? ["password     a password layer, asked next"] : []), plaintext: false)
        var password: SecureBytes?
        if addPassword {
            guard host.canAsk else { throw URLFailure(.passwordRequired) }
            password = try host.password(prompt: "Password for the item: ", confirm: true)
            if scrypt == nil { scrypt = try askScrypt() }
        }
        let header = try ItemHeader(keyID: holding.keyID, type: filename == nil ? .note : .file, passwordProtected: addPassword,
                                    title: "", description: description)
        let itemKey = try await itemKey(for: header, holding: holding)
        var source = BytesSource(content)
        let export = try ItemCrypto.export(header, metadata: SecretMetadata(fileName: filename), content: &source, itemKey: itemKey,
                                           password: password, scrypt: scrypt ?? .default)
        if store { try keep(export, key: itemKey) }
        host.note("vault url: encrypted \(content.count) bytes for \(requester) under key '\(holding.displayName)'")
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
        let title = header.title.isEmpty ? "" : " '\(TerminalText.escaped(header.title))'"
        let about = header.description.isEmpty ? "" : " (\(TerminalText.escaped(header.description)))"
        try confirm([
            "request      decrypt a \(header.type)\(title)\(about)",
            "key          \(TerminalText.escaped(holding.displayName))",
            "store        \(store ? "yes, also in this keystore" : "no")",
            "the plaintext goes to the results' destination",
        ], plaintext: true)
        let itemKey = try await itemKey(for: header, holding: holding)
        var content: [UInt8] = []
        defer { content.wipe() }
        let metadata: SecretMetadata
        do {
            metadata = try ItemCrypto.open(header, streamLength: streamLength, source: &input, itemKey: itemKey, password: {
                guard host.canAsk else { throw URLFailure(.passwordRequired) }
                return try host.password(prompt: "Password for the item: ", confirm: false)
            }) { bytes in
                guard content.count + bytes.count <= Self.maximumData else { throw URLFailure(.invalidParameter, "the plaintext is larger than 64 MiB") }
                content += bytes
            }
        } catch let error as VaultError {
            throw URLFailure(.decryptionFailed, error.description)
        }
        if store { try keep(export, key: itemKey) }
        host.note("vault url: decrypted item \(header.itemIDHex.prefix(16)) for \(requester) with key '\(holding.displayName)'")
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

    private var requester: String { request["x-source"].map { "'\(TerminalText.escaped($0))'" } ?? "an unnamed program" }

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

    /// The key named by `key`, or one the person picks among the unlocked keys.
    private func chooseKey() async throws -> KeyHolding {
        if let name = request["key"] {
            do { return try keystore.sharedKey(matching: name) } catch { throw URLFailure(.unknownKey, VaultError.words(for: error)) }
        }
        let unlocked = try await host.unlockedKeyIDs()
        let candidates = try keystore.sharedKeys().filter { unlocked.contains($0.keyID) }
        guard !candidates.isEmpty else { throw URLFailure(.missingParameter, "key (no key is unlocked to choose from)") }
        guard host.canAsk else {
            if candidates.count == 1 { return candidates[0] }
            throw URLFailure(.missingParameter, "key (more than one key is unlocked)")
        }
        guard let chosen = host.choose("Encrypt with which key?", among: candidates.map(\.displayName)) else { throw URLCancelled() }
        return candidates[chosen]
    }

    /// Where the results go: the origin of `x-success`, else standard output.
    private func destination() throws -> CallbackDestination {
        guard let success = request["x-success"] else { return .standardOutput }
        guard let destination = CallbackDestination(callback: success) else {
            throw URLFailure(.invalidParameter, "x-success has no scheme (or no host for a web address)")
        }
        return destination
    }

    /// Shows the request, with where its results go, and asks. The allowlist is keyed on
    /// that destination, never on `x-source`, which any caller can claim.
    ///
    /// - A plaintext goes to a server (`decrypt` to http/https) only if that exact origin is
    ///   allowed, even with a terminal: one careless "y" must not post a secret to a web page.
    /// - Without a person to ask, only an allowed destination gets results.
    private func confirm(_ details: [String], plaintext: Bool) throws {
        let destination = try destination()
        let allowed = try keystore.isURLDestinationAllowed(destination)
        if plaintext && destination.isNetwork && !allowed {
            throw URLFailure(.confirmationRequired,
                             "the plaintext would go to \(destination), which is not on the allowlist "
                                + "('vault settings url-allow \(destination)' allows it)")
        }
        guard host.canAsk else {
            guard allowed else {
                throw URLFailure(.confirmationRequired,
                                 "no terminal to confirm on, and the results' destination \(destination) is not on the allowlist")
            }
            return
        }
        let source = request["x-source"].map { TerminalText.escaped($0) } ?? "an unnamed program"
        let to = destination == .standardOutput ? "standard output (the program that ran vault)" : destination.description
        guard try host.confirm("Allow this request (results to \(to))?",
                               details: ["results to   \(to)", "from         \(source) (as the caller claims)"] + details)
        else { throw URLCancelled() }
    }

    private func askScrypt() throws -> ScryptParameters {
        let answer = host.ask("scrypt N for the password (32768 to 4194304) [32768]: ") ?? ""
        guard !answer.isEmpty else { return .default }
        guard let n = UInt64(answer), let parameters = try? ScryptParameters(n: n) else {
            throw URLFailure(.scryptNOutOfRange, "32768 ≤ N ≤ 4194304, a power of two")
        }
        return parameters
    }

    /// The item key: from the agent, or, with a person to ask (who has just confirmed), by
    /// recovering the key. Without one a locked key stays locked: no program gets a
    /// plaintext the person did not unlock.
    private func itemKey(for header: ItemHeader, holding: KeyHolding) async throws -> SecureBytes {
        if let key = try await host.unlockedItemKey(for: header, holding: holding) { return key }
        guard host.canAsk else { throw URLFailure(.keyLocked, "'\(holding.displayName)'; unlock it with 'vault unlock'") }
        do {
            let key = try await host.recoverKey(holding)
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
            // A synced key's items change only by signed changes, which a request cannot make.
            if try keystore.syncGroup(keyID: header.keyID) != nil {
                return host.note("vault url: item \(header.itemIDHex.prefix(16)) not stored: its key is synced; add it with 'vault item add'")
            }
            let item = try keystore.importItem(header, streamLength: length, from: &input, key: key, markNew: false)
            host.note("vault url: stored item \(item.header.itemIDHex.prefix(16))")
        } catch VaultError.duplicateItem {
            return
        }
    }
}

/// A documented failure on its way to ``URLOutcome/failure(_:_:)``.
private struct URLFailure: Error {
    let code: URLErrorCode
    let message: String

    init(_ code: URLErrorCode, _ detail: String? = nil) {
        self.code = code
        message = detail.map { "\(code.message): \($0)" } ?? code.message
    }
}

/// The person declined.
public struct URLCancelled: Error {
    /// A refusal by the person asked.
    public init() {}
}
