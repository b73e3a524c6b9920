import Foundation
import NIOCore
import NIOPosix
import VaultCore
import VaultHolders

/// The local agent inside `vault serve`: it holds unlocked shared keys in locked memory
/// until their time runs out, `vault lock`, or the server stops, and zeroes them then.
///
/// It listens on a Unix socket, `$VAULT_HOME/agent.sock`, and talks only to processes of
/// its own uid: the keystore directory is 0700, the socket 0600, and every connection's
/// SO_PEERCRED uid is checked, so even a loosened mode lets no other user in.
///
/// A key never leaves the agent once handed to it. Clients ask for one item's key, derived
/// from the shared key and that item's header hash (``SharedKey/itemKey(_:headerHash:)``),
/// which opens that item and nothing else. Docs/PROTOCOL.md §8 gives the messages.
public final class KeyAgent: @unchecked Sendable {
    private struct Entry {
        let key: SecureBytes
        let until: Date
    }

    private var keys: [[UInt8]: Entry] = [:]
    private let lock = NSLock()
    let log: @Sendable (String) -> Void
    /// The requests waiting for consent (over the LAN and through relays), which `vault
    /// requests|approve|deny` reach here.
    private let approvals: ConsentQueue?
    /// Recovers a key for `vault unlock` with the serve's identity (request 7), if given.
    private let recoverer: AgentRecoverer?
    /// Whether a recovery runs now (one at a time).
    private var recovering = false

    /// The socket's path in `home`.
    public static func socketPath(_ home: VaultHome) -> String { home.directory + "/agent.sock" }

    /// An empty agent that reports to `log`, answers for `approvals` if given, and recovers
    /// keys through `recoverer` if given.
    public init(approvals: ConsentQueue? = nil, recoverer: AgentRecoverer? = nil, log: @escaping @Sendable (String) -> Void) {
        self.approvals = approvals
        self.recoverer = recoverer
        self.log = log
    }

    /// Keeps `key` unlocked for `seconds`; until when.
    func keep(_ key: SecureBytes, keyID: [UInt8], seconds: UInt32) -> Date {
        let until = Date().addingTimeInterval(TimeInterval(seconds))
        lock.withLock { keys[keyID] = Entry(key: key, until: until) }
        log("agent: key \(keyID.hex.prefix(16)) unlocked for \(seconds) s")
        return until
    }

    func beginRecovery() -> Bool {
        lock.withLock {
            guard !recovering else { return false }
            recovering = true
            return true
        }
    }

    func endRecovery() { lock.withLock { recovering = false } }

    /// Connections use the LAN protocol's framing and idle timeout (``SecureChannel/accepted(_:)``),
    /// without Noise.
    /// Serves on `path` until the task is cancelled, then forgets every key. Refuses to
    /// start when another agent answers there; a stale socket file is replaced.
    public func run(path: String, ready: @Sendable () -> Void = {}) async throws {
        if FileManager.default.fileExists(atPath: path) {
            if (try? await AgentClient.connect(path: path)) != nil {
                throw NetError.unreachable("another vault serve already runs an agent on \(path)")
            }
            unlink(path)
        }
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(unixDomainSocketPath: path, childChannelInitializer: SecureChannel.accepted)
        chmod(path, 0o600)
        ready()
        let sweeper = Task {
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: 250_000_000)
                expire()
            }
        }
        defer {
            sweeper.cancel()
            lock.withLock { keys.removeAll() }
            unlink(path)
        }
        try await AcceptLoop.run(server) { channel in { await self.serve(channel) } }
    }

    private func expire() {
        let now = Date()
        let gone = lock.withLock { () -> [[UInt8]] in
            let expired = keys.filter { $0.value.until <= now }.map(\.key)
            expired.forEach { keys[$0] = nil }
            return expired
        }
        for keyID in gone { log("agent: key \(keyID.hex.prefix(16)) locked (its time ran out)") }
    }

    private func serve(_ channel: Channel) async {
        do {
            // Who connected is asked before the connection is wrapped for async use: one
            // refused, or whose question fails, is closed as a plain channel.
            let credentials: PeerCredentials
            do {
                credentials = try await (channel as! SocketOptionProvider)
                    .unsafeGetSocketOption(level: .socket, name: .init(rawValue: SO_PEERCRED)).get()
            } catch {
                channel.close(promise: nil)
                throw error
            }
            guard credentials.uid == getuid() else {
                log("agent: refused a connection from uid \(credentials.uid)")
                try await channel.close()
                return
            }
            let connection = try await SecureChannel.adopt(channel)
            try await connection.executeThenClose { inbound, outbound in
                for try await request in inbound {
                    // Requests carry keys (unlock) and answers item keys (derive): both arrays
                    // are wiped in place once used. (NIO's own buffers are not ours to wipe.)
                    var bytes = Array(request.readableBytesView)
                    if bytes.first == AgentRequest.recover.rawValue, let recoverer {
                        try await recover(&bytes, recoverer: recoverer, channel: connection.channel, pid: credentials.pid) {
                            try await outbound.write(ByteBuffer(bytes: $0))
                        }
                        continue
                    }
                    var answer = handle(bytes)
                    bytes.wipe()
                    try await outbound.write(ByteBuffer(bytes: answer))
                    answer.wipe()
                }
            }
        } catch {
            channel.close(promise: nil)  // closed already, unless it could not be adopted
            log("agent: a connection ended: \(NetError.words(for: error))")
        }
    }

    /// One request, one answer (§8).
    func handle(_ request: [UInt8]) -> [UInt8] {
        guard let first = request.first, let type = AgentRequest(rawValue: first) else { return [AgentStatus.malformed.rawValue] }
        let body = request.dropFirst()
        switch type {
        case .unlock:
            guard body.count == 16 + 4 + SharedKey.length else { return [AgentStatus.malformed.rawValue] }
            let keyID = Array(body.prefix(16))
            let seconds = body.dropFirst(16).prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            guard seconds >= 1, seconds <= AgentLimits.maximumSeconds else { return [AgentStatus.malformed.rawValue] }
            _ = keep(SecureBytes(copying: body.suffix(SharedKey.length)), keyID: keyID, seconds: seconds)
            return [AgentStatus.ok.rawValue]
        case .derive:
            guard body.count == 16 + 32 else { return [AgentStatus.malformed.rawValue] }
            let keyID = Array(body.prefix(16))
            guard let entry = lock.withLock({ keys[keyID] }), entry.until > Date() else { return [AgentStatus.locked.rawValue] }
            let itemKey = SharedKey.itemKey(entry.key, headerHash: Array(body.suffix(32)))
            return itemKey.withUnsafeBytes { [AgentStatus.ok.rawValue] + Array($0) }
        case .lock:
            guard body.isEmpty || body.count == 16 else { return [AgentStatus.malformed.rawValue] }
            let count = lock.withLock { () -> Int in
                if body.isEmpty {
                    defer { keys.removeAll() }
                    return keys.count
                }
                return keys.removeValue(forKey: Array(body)) == nil ? 0 : 1
            }
            if count > 0 { log("agent: \(count) key\(count == 1 ? "" : "s") locked on request") }
            return [AgentStatus.ok.rawValue, UInt8(min(count, 255))]
        case .status:
            let now = Date()
            let entries = lock.withLock { keys.filter { $0.value.until > now }.map { ($0.key, $0.value.until) } }
            var answer = [AgentStatus.ok.rawValue, UInt8(min(entries.count, 255))]
            for (keyID, until) in entries.prefix(255) {
                answer += keyID
                let seconds = UInt64(until.timeIntervalSince1970)
                answer += (0..<8).reversed().map { UInt8(truncatingIfNeeded: seconds >> (8 * UInt64($0))) }
            }
            return answer
        case .requests:
            guard body.isEmpty, let approvals else { return [AgentStatus.malformed.rawValue] }
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .secondsSince1970
            guard let json = try? encoder.encode(approvals.waiting()) else { return [AgentStatus.malformed.rawValue] }
            return [AgentStatus.ok.rawValue] + Array(json)
        case .recover:
            // Streamed, in ``recover(_:recoverer:write:)``; without a recoverer, not served.
            return [AgentStatus.malformed.rawValue]
        case .decide:
            // approve (1) or deny (0) ‖ the id or a prefix of it, as ASCII hex
            guard let approvals, body.count >= 5, body.count <= 9, let verdict = body.first, verdict <= 1,
                  let prefix = String(validating: body.dropFirst(), as: UTF8.self) else { return [AgentStatus.malformed.rawValue] }
            guard let decided = approvals.decide(prefix, approve: verdict == 1) else { return [AgentStatus.locked.rawValue] }
            let what = decided.kind == "share" ? "share \(decided.holder) of \(decided.secretID.prefix(16)) from" : "piece \(decided.holder) of \(decided.secretID.prefix(16)) for"
            log("\(verdict == 1 ? "approved" : "denied") request \(decided.id): \(what) '\(decided.peer)'")
            return [AgentStatus.ok.rawValue] + Array(decided.id.utf8)
        }
    }
}

/// `struct ucred` (pid, uid, gid), which Glibc's Swift module leaves out: SO_PEERCRED
/// fills it with the credentials of the process on the other end.
struct PeerCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

/// The agent's bounds.
public enum AgentLimits {
    /// The longest time a key stays unlocked: 24 hours.
    public static let maximumSeconds: UInt32 = 24 * 3600
}

enum AgentRequest: UInt8 {
    case unlock = 1, derive = 2, lock = 3, status = 4, requests = 5, decide = 6, recover = 7
}

enum AgentStatus: UInt8 {
    /// `progress` and `failed` answer a recovery (request 7) only.
    case ok = 0, locked = 1, malformed = 2, progress = 3, failed = 5
}

/// The local agent as a client sees it: each request on a connection of its own.
public struct AgentClient: Sendable {
    private let path: String

    /// The agent of `home`, if a `vault serve` runs one there and it answers.
    public static func connect(home: VaultHome) async -> AgentClient? {
        try? await connect(path: KeyAgent.socketPath(home))
    }

    static func connect(path: String) async throws -> AgentClient {
        let client = AgentClient(path: path)
        _ = try await client.status()
        return client
    }

    /// Hands `key` to the agent for `seconds`.
    public func unlock(keyID: [UInt8], key: SecureBytes, seconds: UInt32) async throws {
        var request = [AgentRequest.unlock.rawValue] + keyID + (0..<4).reversed().map { UInt8(truncatingIfNeeded: seconds >> (8 * UInt32($0))) }
        key.withUnsafeBytes { request += $0 }
        defer { request.wipe() }
        guard try await ask(request).first == AgentStatus.ok.rawValue else { throw NetError.protocolViolation("the agent refused the key") }
    }

    /// The item key for `headerHash` under `keyID`, or nil when that key is locked.
    public func itemKey(keyID: [UInt8], headerHash: [UInt8]) async throws -> SecureBytes? {
        var answer = try await ask([AgentRequest.derive.rawValue] + keyID + headerHash)
        defer { answer.wipe() }
        switch answer.first {
        case AgentStatus.ok.rawValue where answer.count == 1 + SharedKey.length: return SecureBytes(copying: answer.dropFirst())
        case AgentStatus.locked.rawValue: return nil
        default: throw NetError.protocolViolation("the agent sent a malformed answer")
        }
    }

    /// The item keys for several headers under `keyID` (their hashes), asked on one
    /// connection: an app reading or writing many objects pays for one connection, not one
    /// each. nil for each when the key is locked.
    public func itemKeys(keyID: [UInt8], headerHashes: [[UInt8]]) async throws -> [SecureBytes?] {
        guard !headerHashes.isEmpty else { return [] }
        var answers = try await ask(headerHashes.map { [AgentRequest.derive.rawValue] + keyID + $0 })
        defer { for i in answers.indices { answers[i].wipe() } }
        return try answers.map { answer in
            switch answer.first {
            case AgentStatus.ok.rawValue where answer.count == 1 + SharedKey.length: return SecureBytes(copying: answer.dropFirst())
            case AgentStatus.locked.rawValue: return nil
            default: throw NetError.protocolViolation("the agent sent a malformed answer")
            }
        }
    }

    /// Locks one key, or every key; returns how many were unlocked.
    public func lock(keyID: [UInt8]?) async throws -> Int {
        let answer = try await ask([AgentRequest.lock.rawValue] + (keyID ?? []))
        guard answer.count == 2, answer[0] == AgentStatus.ok.rawValue else { throw NetError.protocolViolation("the agent sent a malformed answer") }
        return Int(answer[1])
    }

    /// The unlocked keys and until when.
    public func status() async throws -> [(keyID: [UInt8], until: Date)] {
        let answer = try await ask([AgentRequest.status.rawValue])
        guard answer.count >= 2, answer[0] == AgentStatus.ok.rawValue, answer.count == 2 + Int(answer[1]) * 24 else {
            throw NetError.protocolViolation("the agent sent a malformed answer")
        }
        return (0..<Int(answer[1])).map { i in
            let entry = answer[(2 + 24 * i)..<(2 + 24 * (i + 1))]
            let seconds = entry.suffix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            return (Array(entry.prefix(16)), Date(timeIntervalSince1970: TimeInterval(seconds)))
        }
    }

    /// The piece requests waiting for this holder's consent.
    public func requests() async throws -> [ReleaseApprovals.Request] {
        let answer = try await ask([AgentRequest.requests.rawValue])
        guard answer.first == AgentStatus.ok.rawValue else { throw NetError.protocolViolation("the agent sent a malformed answer") }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        guard let requests = try? decoder.decode([ReleaseApprovals.Request].self, from: Data(answer.dropFirst())) else {
            throw NetError.protocolViolation("the agent sent a malformed answer")
        }
        return requests
    }

    /// Approves or denies the waiting request whose id starts with `prefix`; returns its
    /// full id, or nil when no single waiting request matches.
    public func decide(_ prefix: String, approve: Bool) async throws -> String? {
        guard (4...8).contains(prefix.count), prefix.allSatisfy(\.isHexDigit) else { return nil }
        let answer = try await ask([AgentRequest.decide.rawValue, approve ? 1 : 0] + Array(prefix.lowercased().utf8))
        switch answer.first {
        case AgentStatus.ok.rawValue: return String(decoding: answer.dropFirst(), as: UTF8.self)
        case AgentStatus.locked.rawValue: return nil
        default: throw NetError.protocolViolation("the agent sent a malformed answer")
        }
    }

    /// One request and its answer, on a new connection (closed by an idle timeout if the
    /// agent never answers).
    private func ask(_ request: [UInt8]) async throws -> [UInt8] {
        try await ask([request])[0]
    }

    /// One request on a new connection, and the frames that answer it: each goes to
    /// `partial`, until one it does not take (returns false), which is the answer.
    func stream(_ request: [UInt8], partial: ([UInt8]) -> Bool) async throws -> [UInt8] {
        let connection = try await connect()
        do {
            return try await connection.executeThenClose { inbound, outbound in
                var iterator = inbound.makeAsyncIterator()
                try await outbound.write(ByteBuffer(bytes: request))
                while true {
                    guard let frame = try await iterator.next() else { throw NetError.closed }
                    let bytes = Array(frame.readableBytesView)
                    if !partial(bytes) { return bytes }
                }
            }
        } catch {
            throw NetError.lifting(error)
        }
    }

    private func connect() async throws -> NIOAsyncChannel<ByteBuffer, ByteBuffer> {
        do {
            return try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.seconds(2))
                .connect(unixDomainSocketPath: path) { SecureChannel.configure($0) }
        } catch {
            throw NetError.unreachable("the agent at \(path): \(NetError.reason(of: error) ?? VaultError.words(for: error))")
        }
    }

    /// Requests and their answers, one after the other on one new connection.
    private func ask(_ requests: [[UInt8]]) async throws -> [[UInt8]] {
        let connection = try await connect()
        do {
            return try await connection.executeThenClose { inbound, outbound in
                var iterator = inbound.makeAsyncIterator()
                var answers: [[UInt8]] = []
                for request in requests {
                    try await outbound.write(ByteBuffer(bytes: request))
                    guard let answer = try await iterator.next() else { throw NetError.closed }
                    answers.append(Array(answer.readableBytesView))
                }
                return answers
            }
        } catch {
            throw NetError.lifting(error)
        }
    }
}
