import NIOCore
import NIOPosix
import VaultCore
import VaultHolders

/// A TCP connection to a peer after a Noise XX handshake: every byte on it is encrypted and
/// authenticated, and `remoteKey` is the peer's proven X25519 key.
public final class SecureChannel {
    private var inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
    private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    private var session: NoiseSession
    private var pending: [UInt8] = []
    /// The peer's static key, proven by the handshake.
    public let remoteKey: [UInt8]
    /// Shared by both ends; proofs bind to it.
    public var handshakeHash: [UInt8] { session.handshakeHash }

    private init(inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator, outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
                 session: NoiseSession, remoteKey: [UInt8]) {
        self.inbound = inbound
        self.outbound = outbound
        self.session = session
        self.remoteKey = remoteKey
    }

    /// The pipeline under every connection: idle timeout, then length-prefixed frames.
    static func configure(_ channel: Channel) -> EventLoopFuture<NIOAsyncChannel<ByteBuffer, ByteBuffer>> {
        channel.eventLoop.makeCompletedFuture {
            try addFraming(channel)
            return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
        }
    }

    /// The child initializer of a server's bind: the pipeline, but no async wrapper yet, and
    /// nothing read until there is one (``adopt(_:)``). NIO hands accepted connections over
    /// through a buffer, and a wrapper dropped from it traps the process (``AcceptLoop``).
    @Sendable static func accepted(_ channel: Channel) -> EventLoopFuture<Channel> {
        channel.eventLoop.makeCompletedFuture {
            try addFraming(channel)
            try channel.syncOptions?.setOption(.autoRead, value: false)
            return channel
        }
    }

    /// The async wrapper of a connection a server accepted (``accepted(_:)``), made in the
    /// task that serves it, right before its `executeThenClose`; then it reads.
    static func adopt(_ channel: Channel) async throws -> NIOAsyncChannel<ByteBuffer, ByteBuffer> {
        try await channel.eventLoop.submit {
            let connection = try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
            try channel.syncOptions?.setOption(.autoRead, value: true)
            return connection
        }.get()
    }

    private static func addFraming(_ channel: Channel) throws {
        let sync = channel.pipeline.syncOperations
        try sync.addHandler(IdleStateHandler(readTimeout: .seconds(NetLimits.idleSeconds)), name: idleHandlers[0])
        try sync.addHandler(IdleCloser(), name: idleHandlers[1])
        try sync.addHandler(ByteToMessageHandler(FrameDecoder()))
        try sync.addHandler(MessageToByteHandler(FrameEncoder()))
    }

    private static let idleHandlers = ["vault-idle-state", "vault-idle-closer"]

    /// Takes the idle timeout off a connection whose peer waits for long work it was told
    /// of (the agent's recovery for `vault unlock`, which lasts as long as its holders take).
    /// (The idle events go on firing, and reach nothing that acts on them.)
    static func liftIdleTimeout(_ channel: Channel) async throws {
        try await channel.pipeline.removeHandler(name: idleHandlers[1]).get()
    }

    /// Runs the handshake on `connection`, then `body`; closes the connection afterwards.
    /// With `expectedRemote`, an initiator checks the responder's static key as soon as
    /// message 2 reveals it, and aborts before message 3 reveals its own: a spoofed mDNS
    /// answer learns nothing about who was looking for whom.
    static func run<T>(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, initiator: Bool, identity: Identity,
                       expectedRemote: (key: [UInt8], label: String)? = nil,
                       _ body: (SecureChannel) async throws -> T) async throws -> T {
        let channel = connection.channel
        // A handshake dribbled in one byte at a time passes the idle check: bound it whole.
        let deadline = channel.eventLoop.scheduleTask(in: .seconds(NetLimits.handshakeSeconds)) { channel.close(promise: nil) }
        // A socket error (a reset, a broken pipe) is told in words, as a NetError.
        do {
            return try await runClosing(connection, initiator: initiator, identity: identity, expectedRemote: expectedRemote,
                                        deadline: deadline, body)
        } catch {
            throw NetError.lifting(error)
        }
    }

    private static func runClosing<T>(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, initiator: Bool, identity: Identity,
                                      expectedRemote: (key: [UInt8], label: String)?, deadline: Scheduled<Void>,
                                      _ body: (SecureChannel) async throws -> T) async throws -> T {
        try await connection.executeThenClose { inbound, outbound in
            var iterator = inbound.makeAsyncIterator()
            let handshake = NoiseHandshake(initiator: initiator, identitySecret: identity.agreementSecretKey)
            func read() async throws -> [UInt8] {
                guard let frame = try await iterator.next() else { throw NetError.closed }
                return Array(frame.readableBytesView)
            }
            func write(_ bytes: [UInt8]) async throws { try await outbound.write(ByteBuffer(bytes: bytes)) }
            // vault sends nothing in handshake payloads; a payload is refused rather than hashed,
            // so a man in the middle has no free bytes to vary the handshake hash with.
            func readEmpty() async throws {
                guard try handshake.readMessage(try await read()).isEmpty else {
                    throw NetError.protocolViolation("a handshake message carries a payload")
                }
            }
            if initiator {
                try await write(handshake.writeMessage())
                try await readEmpty()
                if let expectedRemote, handshake.remoteStatic != expectedRemote.key {
                    throw NetError.unexpectedPeer(expected: expectedRemote.label)
                }
                try await write(handshake.writeMessage())
            } else {
                try await readEmpty()
                try await write(handshake.writeMessage())
                try await readEmpty()
            }
            deadline.cancel()
            let secure = SecureChannel(inbound: iterator, outbound: outbound, session: try handshake.session(),
                                       remoteKey: handshake.remoteStatic!)
            return try await body(secure)
        }
    }

    // MARK: Messages

    /// Sends a message whose body is in memory.
    func send(_ type: PeerMessageType, _ body: [UInt8]) async throws {
        var source = BytesSource(body)
        try await send(type, length: UInt64(body.count), from: &source)
    }

    /// Sends a message whose body streams from `source` (exactly `length` bytes).
    func send(_ type: PeerMessageType, length: UInt64, from source: inout some ByteSource) async throws {
        var header = [NetLimits.protocolVersion, type.rawValue]
        for shift in stride(from: 56, through: 0, by: -8) { header.append(UInt8(truncatingIfNeeded: length >> UInt64(shift))) }
        var frame = header
        var left = length
        var buffer = [UInt8](repeating: 0, count: NetLimits.framePlaintext)
        repeat {
            let room = NetLimits.framePlaintext - frame.count
            let want = Int(min(UInt64(room), left))
            var got = 0
            while got < want {
                let count = try buffer.withUnsafeMutableBytes { try source.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[got..<want])) }
                guard count > 0 else { throw NetError.protocolViolation("the body ended early") }
                got += count
            }
            frame += buffer[0..<got]
            left -= UInt64(got)
            try await outbound.write(ByteBuffer(bytes: try session.seal(frame)))
            frame = []
        } while left > 0
    }

    /// Receives a message header; its body must then be read with ``receiveBody(_:into:)``.
    func receiveHeader() async throws -> (type: PeerMessageType, length: UInt64) {
        let (type, length, start) = try PeerMessageType.parseHeader(try await receiveFrame())
        pending = start
        return (type, length)
    }

    /// Receives exactly `length` body bytes; the last frame must end where the body ends.
    func receiveBody(_ length: UInt64, into sink: (UnsafeRawBufferPointer) throws -> Void) async throws {
        var left = length
        while true {
            try pending.withUnsafeBytes { try sink($0) }
            left -= UInt64(pending.count)
            pending = []
            if left == 0 { return }
            let frame = try await receiveFrame()
            guard UInt64(frame.count) <= left else { throw NetError.protocolViolation("a message overruns its length") }
            pending = frame
        }
    }

    /// Receives a whole small message.
    func receive() async throws -> (type: PeerMessageType, body: [UInt8]) {
        let (type, length) = try await receiveHeader()
        guard length <= 64 * 1024 else { throw NetError.protocolViolation("a \(type) message cannot be streamed here") }
        var body: [UInt8] = []
        try await receiveBody(length) { body += $0 }
        return (type, body)
    }

    func refuse(_ code: Refusal, _ reason: String = "") async throws {
        try await send(.refused, [code.rawValue] + Array(reason.utf8.prefix(512)))
    }

    /// Answers a piece request with what it came to, when that is no release.
    func answer(_ outcome: PieceAnswer) async throws {
        try await send(.pieceAnswer, outcome.wire)
    }

    private func receiveFrame() async throws -> [UInt8] {
        guard let frame = try await inbound.next() else { throw NetError.closed }
        return try session.open(Array(frame.readableBytesView))
    }
}

extension Refusal {
    /// Decodes a `refused` or `deliverResult` body: the code, and the peer's words (shown,
    /// never read for meaning).
    static func parse(_ body: [UInt8]) -> (Refusal, String)? {
        guard let first = body.first, let code = Refusal(rawValue: first) else { return nil }
        return (code, String(decoding: body.dropFirst(), as: UTF8.self))
    }
}
