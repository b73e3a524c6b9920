import Foundation
import NIOCore
import NIOPosix
import VaultCore

/// A shared key's recovery run by the agent, for `vault unlock` with a serve running
/// (Docs/PROTOCOL.md §8, request 7): the serve's identity, unlocked already, asks the holders,
/// so the person is not asked for the passphrase a second time, and the key it recovers
/// goes straight into the agent: it never crosses the socket.
///
/// The client gives the key, the time it stays unlocked, the key's password layer when it
/// has one (read by the client, from its file or terminal, before anything is asked), and
/// the options of the recovery. The agent streams the recovery's lines back as they come,
/// then its end: unlocked, or the error the command prints and the status it exits with.
public final class AgentRecoveryJob: @unchecked Sendable {
    /// The key to recover and unlock.
    public let keyID: [UInt8]
    /// How long it stays unlocked once recovered.
    public let seconds: UInt32
    /// The key's password layer, when the client gave one (zeroed when the job ends).
    public let password: SecureBytes?
    /// The recovery's options, as the client gave them.
    public let options: AgentRecoveryOptions
    private let line: @Sendable (String) -> Void

    init(keyID: [UInt8], seconds: UInt32, password: SecureBytes?, options: AgentRecoveryOptions, line: @escaping @Sendable (String) -> Void) {
        self.keyID = keyID
        self.seconds = seconds
        self.password = password
        self.options = options
        self.line = line
    }

    /// Sends one line of the recovery's progress to the client (at most 4 KiB of it).
    public func say(_ text: String) { line(String(decoding: text.utf8.prefix(AgentRecoveryOptions.maximumBytes), as: UTF8.self)) }
}

/// What the client asks of a recovery: the options of `vault unlock` that the agent's
/// recovery takes (the rest, such as the password file, the client reads itself).
public struct AgentRecoveryOptions: Codable, Sendable, Equatable {
    /// `--peer LABEL=HOST:PORT`, each.
    public var peers: [String] = []
    public var timeout: Int?
    public var group: String?
    public var wait = false
    public var ttl = "3d"
    public var restart = false

    /// The largest JSON of options, and the longest line, taken.
    static let maximumBytes = 4096

    public init(peers: [String] = [], timeout: Int? = nil, group: String? = nil, wait: Bool = false, ttl: String = "3d", restart: Bool = false) {
        (self.peers, self.timeout, self.group, self.wait, self.ttl, self.restart) = (peers, timeout, group, wait, ttl, restart)
    }

    /// The options as command-line arguments of `vault unlock`, for the serve to parse as
    /// the command would: one set of checks for both.
    /// Each value joined to its option by `=`, so that a value cannot be read as another
    /// option (a `--peer` of `--dealer=…`).
    public var arguments: [String] {
        var arguments: [String] = peers.map { "--peer=" + $0 }
        if let timeout { arguments.append("--timeout=\(timeout)") }
        if let group { arguments.append("--group=" + group) }
        if wait { arguments.append("--wait") }
        arguments.append("--ttl=" + ttl)
        if restart { arguments.append("--restart") }
        return arguments
    }
}

/// How a recovery the agent ran ended. (Unchecked: the key it holds is handed from the
/// recovery's task to the agent once, and used by nothing else meanwhile.)
public enum AgentRecoveryOutcome: @unchecked Sendable {
    /// Recovered: the agent keeps the key for the job's time.
    case unlocked(SecureBytes)
    /// Not recovered: the error line the command prints, its hint, and its exit status.
    case failed(error: String, hint: String?, status: Int32)
}

/// A recovery the agent ran ended without the key: the command says why and exits so.
public struct AgentRecoveryFailure: Error, Sendable {
    public let error: String
    public let hint: String?
    public let status: Int32
}

/// Runs a recovery for a client: set by `vault serve`, which holds the identity.
public typealias AgentRecoverer = @Sendable (AgentRecoveryJob) async -> AgentRecoveryOutcome

extension KeyAgent {
    /// Request 7: parses it (and wipes it: it holds the password), runs `recoverer` while
    /// streaming its lines, keeps the key it recovered, and answers how it ended. One
    /// recovery at a time: a second is refused while one runs (two recoveries of one key
    /// would race for its holders' answers). A client that goes away, or a serve that stops,
    /// stops the recovery, and a key it made anyway is dropped, not kept.
    func recover(_ request: inout [UInt8], recoverer: @escaping AgentRecoverer, channel: Channel, pid: Int32,
                 write: @escaping @Sendable ([UInt8]) async throws -> Void) async throws {
        defer { request.wipe() }
        let body = request.dropFirst()
        guard body.count >= 16 + 4 + 2 else { return try await write([AgentStatus.malformed.rawValue]) }
        let keyID = Array(body.prefix(16))
        let seconds = body.dropFirst(16).prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        let passwordLength = body.dropFirst(20).prefix(2).reduce(0) { $0 << 8 | Int($1) }
        let rest = body.dropFirst(22)
        guard seconds >= 1, seconds <= AgentLimits.maximumSeconds, passwordLength <= PassphraseFile.maximumLength, rest.count >= passwordLength,
              rest.count - passwordLength <= AgentRecoveryOptions.maximumBytes,
              let options = try? JSONDecoder().decode(AgentRecoveryOptions.self, from: Data(rest.dropFirst(passwordLength))) else {
            return try await write([AgentStatus.malformed.rawValue])
        }
        let password = passwordLength == 0 ? nil : SecureBytes(copying: rest.prefix(passwordLength))
        request.wipe()
        guard beginRecovery() else {
            return try await write(Self.failure(error: "another 'vault unlock' is recovering a key through this serve", hint: "wait for it to end",
                                                status: 1))
        }
        defer { endRecovery() }
        // Said in serve's log: any process of this uid may ask (Docs/SECURITY.md), and its
        // person should see that one did.
        log("agent: recovering key \(keyID.hex.prefix(16)) for 'vault unlock' (process \(pid))")
        // The recovery lasts as long as its holders take, past the idle timeout; it ends
        // with the client instead.
        try await SecureChannel.liftIdleTimeout(channel)
        let (lines, lineSink) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let job = AgentRecoveryJob(keyID: keyID, seconds: seconds, password: password, options: options) { lineSink.yield($0) }
        let running = Task { () -> AgentRecoveryOutcome in
            defer { lineSink.finish() }
            return await recoverer(job)
        }
        // The client learns that the recovery still runs, and the agent that the client
        // is still there: an empty line every 10 s, which fails to write once it is gone.
        let keepalive = Task {
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: 10_000_000_000)
                if !Task.isCancelled { lineSink.yield("") }
            }
        }
        defer { keepalive.cancel() }
        do {
            try await withTaskCancellationHandler {
                for await line in lines { try await write([AgentStatus.progress.rawValue] + Array(line.utf8)) }
            } onCancel: {
                running.cancel()
            }
        } catch {
            // Waited for (it stops at its next look), so that the next unlock of the key does
            // not race it in the keystore; what it made anyway is dropped, zeroed with it.
            running.cancel()
            _ = await running.value
            endRecovery()
            log("agent: the recovery of key \(keyID.hex.prefix(16)) stopped: its 'vault unlock' went away")
            throw error
        }
        let outcome = await running.value
        // A serve that stops keeps nothing.
        if Task.isCancelled { return }
        try await write(finish(outcome, job: job))
    }

    /// Keeps a recovered key; the final answer for the client.
    private func finish(_ outcome: AgentRecoveryOutcome, job: AgentRecoveryJob) async -> [UInt8] {
        switch outcome {
        case .unlocked(let key):
            let until = keep(key, keyID: job.keyID, seconds: job.seconds)
            let seconds = UInt64(until.timeIntervalSince1970)
            return [AgentStatus.ok.rawValue] + (0..<8).reversed().map { UInt8(truncatingIfNeeded: seconds >> (8 * UInt64($0))) }
        case .failed(let error, let hint, let status):
            return Self.failure(error: error, hint: hint, status: status)
        }
    }

    private static func failure(error: String, hint: String?, status: Int32) -> [UInt8] {
        struct Failure: Encodable { let error: String, hint: String?, status: Int32 }
        let json = (try? JSONEncoder().encode(Failure(error: error, hint: hint, status: status))) ?? Data()
        return [AgentStatus.failed.rawValue] + Array(json)
    }
}

extension AgentClient {
    /// Has the agent recover `keyID` from its holders and keep it for `seconds`; each line
    /// of the recovery goes to `line` as it comes. Returns until when the key is unlocked;
    /// throws ``AgentRecoveryFailure`` when the recovery ended without it.
    public func recover(keyID: [UInt8], seconds: UInt32, password: SecureBytes?, options: AgentRecoveryOptions,
                        line: @escaping (String) -> Void) async throws -> Date {
        let json = Array(try JSONEncoder().encode(options))
        let length = password?.count ?? 0
        // Room for all of it first: growing would leave copies of the password behind.
        var request: [UInt8] = []
        request.reserveCapacity(1 + 16 + 4 + 2 + length + json.count)
        request += [AgentRequest.recover.rawValue] + keyID + (0..<4).reversed().map { UInt8(truncatingIfNeeded: seconds >> (8 * UInt32($0))) }
        request += [UInt8(length >> 8), UInt8(length & 0xff)]
        password?.withUnsafeBytes { request += $0 }
        request += json
        defer { request.wipe() }
        var answer = try await stream(request) { frame in
            guard frame.first == AgentStatus.progress.rawValue else { return false }
            let text = String(decoding: frame.dropFirst(), as: UTF8.self)
            if !text.isEmpty { line(text) }
            return true
        }
        defer { answer.wipe() }
        switch answer.first {
        case AgentStatus.ok.rawValue where answer.count == 9:
            return Date(timeIntervalSince1970: TimeInterval(answer.dropFirst().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }))
        case AgentStatus.failed.rawValue:
            struct Failure: Decodable { let error: String, hint: String?, status: Int32 }
            guard let failure = try? JSONDecoder().decode(Failure.self, from: Data(answer.dropFirst())) else {
                throw NetError.protocolViolation("the agent sent a malformed answer")
            }
            throw AgentRecoveryFailure(error: failure.error, hint: failure.hint, status: failure.status)
        case AgentStatus.malformed.rawValue where answer.count == 1:
            // A serve from before request 7 knows no such request.
            throw AgentRecoveryFailure(error: "the running 'vault serve' cannot recover keys for 'vault unlock': it is older than this vault",
                                       hint: "restart 'vault serve'", status: 1)
        default:
            throw NetError.protocolViolation("the agent sent a malformed answer")
        }
    }
}
