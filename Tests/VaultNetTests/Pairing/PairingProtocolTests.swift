import Foundation
import NIOCore
import NIOPosix
import Testing
@testable import VaultCore
@testable import VaultNet
import VaultTestSupport

/// Issue 14, finding 2: the pairing code cannot be ground by a man in the middle.
@Suite struct PairingProtocolTests {
    /// A `vault serve --pairing` for a fresh identity, confirming every code; `shown` gets
    /// each code its person was asked to compare.
    final class PairingServer: @unchecked Sendable {
        let temporary = TemporaryDirectory("vault-pair")
        let keystore: Keystore
        let identity: Identity
        private let lock = NSLock()
        private var codes: [String] = []
        var shown: [String] { lock.withLock { codes } }

        init() throws {
            keystore = try Keystore.create(home: VaultHome(directory: temporary.file("server")), label: Label("server"), passphrase: nil)
            identity = try keystore.unlock(passphrase: nil)
        }

        func record(_ code: String) { lock.withLock { codes.append(code) } }

        func run<T>(_ body: (PeerAddress) async throws -> T) async throws -> T {
            let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
            let server = PeerServer(keystore: keystore, identity: identity, confirm: nil,
                                    pairing: (NetLimits.maximumPairingWindow, { @Sendable code, _, _ in self.record(code); return true })) { _ in }
            let task = Task { try await server.run(host: "127.0.0.1", port: 0) { continuation.yield($0) } }
            defer { task.cancel() }
            var iterator = ports.makeAsyncIterator()
            let port = await iterator.next()!
            return try await body(try PeerAddress("127.0.0.1:\(port)"))
        }
    }

    static func stranger(_ label: String) throws -> Identity {
        try Identity(label: Label(label), card: nil, secret: SecureBytes.random(count: 64))
    }

    /// The man in the middle, as a client of the real server: it must commit before it sees
    /// the server's nonce. Reveals `revealed` (nil: the committed nonce itself) and returns
    /// the server's answer and the code it would show.
    static func attempt(_ address: PeerAddress, as mallory: Identity, revealing revealed: [UInt8]? = nil) async throws
        -> (answer: PeerMessageType, body: [UInt8], code: String?) {
        try await PeerClient.connectUnknown(at: address, identity: mallory) { channel in
            let hash = channel.handshakeHash
            let nonce = SecureRandom().bytes(32)
            try await channel.send(.pairCard, Pairing.cardMessage(mallory, handshakeHash: hash,
                                                                  value: Pairing.commitment(handshakeHash: hash, nonce: nonce)))
            let (type, body) = try await channel.receive()
            guard type == .pairCard else { return (type, body, nil) }
            let (_, _, serverNonce) = try Pairing.parseCard(body, remoteKey: channel.remoteKey, handshakeHash: hash)
            try await channel.send(.pairReveal, revealed ?? nonce)
            if revealed == nil { try await channel.send(.pairDecision, [0]) }
            let (answer, answerBody) = try await channel.receive()
            return (answer, answerBody, Pairing.code(handshakeHash: hash, clientNonce: revealed ?? nonce, serverNonce: serverNonce))
        }
    }

    @Test func theManInTheMiddleCannotGrindTheCode() async throws {
        let server = try PairingServer()
        let mallory = try Self.stranger("mallory")
        try await server.run { address in
            // Mallory's other half of the attack is with the client: say that side shows
            // "1234 5678". To pass, the server's code must come out the same; it is fixed by
            // the server's nonce, which arrives only after Mallory committed to its own.
            let target = "1234 5678"
            let first = try await Self.attempt(address, as: mallory)
            #expect(first.answer == .pairDecision && first.code == server.shown.first, "both sides compute one code")
            // Revealing another nonce than the committed one, once the server's nonce is
            // known, is the only way left to steer the code: it is refused, and no code is shown.
            let shownBefore = server.shown.count
            let steered = try await Self.attempt(address, as: mallory, revealing: SecureRandom().bytes(32))
            #expect(steered.answer == .refused)
            #expect(String(decoding: steered.body.dropFirst(), as: UTF8.self).contains("does not match the commitment"))
            #expect(server.shown.count == shownBefore)
            // Grinding by retrying: every try is a prompt, and the server allows 5 a minute.
            var refused = 0, matched = 0
            for _ in 0..<8 {
                do {
                    let run = try await Self.attempt(address, as: mallory)
                    if run.code == target { matched += 1 }
                } catch NetError.refused(.rateLimited, _) {
                    refused += 1
                }
            }
            // (At least one refused: the 5 a minute fill up well within a minute, even on a
            // machine busy with other tests.)
            #expect(refused >= 1 && matched == 0, "\(refused) refused")
            #expect(try server.keystore.peers().isEmpty)
        }
    }

    @Test func aCardWhoseHalvesDoNotBelongTogetherIsRefused() async throws {
        let server = try PairingServer()
        let mallory = try Self.stranger("mallory")
        let victim = try Self.stranger("victim")
        try await server.run { address in
            // Mallory's handshake key with the victim's signing key.
            let answer = try await PeerClient.connectUnknown(at: address, identity: mallory) { channel -> PeerMessageType? in
                let hash = channel.handshakeHash
                var message = Pairing.cardMessage(mallory, handshakeHash: hash, value: [UInt8](repeating: 0, count: 32))
                let forged = try KeyCard(encoded: [KeyCard.version] + mallory.card.agreementKey + victim.card.signingKey)
                message.replaceSubrange(0..<KeyCard.encodedLength, with: forged.encoded)
                try await channel.send(.pairCard, message)
                return try? await channel.receive().0
            }
            #expect(answer != .pairCard)
            #expect(server.shown.isEmpty)
            #expect(try server.keystore.peers().isEmpty)
        }
        // The check itself: a signature over another handshake's hash does not do.
        let hash = SecureRandom().bytes(64)
        let good = Pairing.cardMessage(mallory, handshakeHash: hash, value: SecureRandom().bytes(32))
        #expect(throws: NetError.self) { try Pairing.parseCard(good, remoteKey: mallory.card.agreementKey, handshakeHash: SecureRandom().bytes(64)) }
        #expect(try Pairing.parseCard(good, remoteKey: mallory.card.agreementKey, handshakeHash: hash).1.value == "mallory")
    }

    @Test func aDeclineSaysNothingOfWhatTheServerTrusts() async throws {
        let server = try PairingServer()
        let mallory = try Self.stranger("mallory")
        try server.keystore.addPeer(try Self.stranger("other").card, label: Label("mallory"), address: nil)
        try await server.run { address in
            let run = try await Self.attempt(address, as: mallory)
            let reason = String(decoding: run.body.dropFirst(), as: UTF8.self)
            #expect(run.answer == .refused && reason == "declined by the server", "\(reason)")
        }
    }

    @Test func theCodeDependsOnBothNonces() {
        let hash = SecureRandom().bytes(64), a = SecureRandom().bytes(32), b = SecureRandom().bytes(32)
        let code = Pairing.code(handshakeHash: hash, clientNonce: a, serverNonce: b)
        #expect(code.count == 9)
        // The same handshake hash no longer fixes the code.
        let others = (0..<20).map { _ in Pairing.code(handshakeHash: hash, clientNonce: SecureRandom().bytes(32), serverNonce: b) }
        #expect(others.filter { $0 == code }.count <= 1)
    }

    @Test func handshakePayloadsAreRefused() async throws {
        let server = try PairingServer()
        let mallory = try Self.stranger("mallory")
        let reply: ByteBuffer? = try await server.run { address in
            let connection = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: address.host, port: Int(address.port)) { SecureChannel.configure($0) }
            return try await connection.executeThenClose { inbound, outbound in
                let handshake = NoiseHandshake(initiator: true, identitySecret: mallory.agreementSecretKey)
                // Free bytes in message 1 would let a man in the middle vary the handshake hash.
                try await outbound.write(ByteBuffer(bytes: try handshake.writeMessage(payload: Array("grind me".utf8))))
                var replies = inbound.makeAsyncIterator()
                return try? await replies.next()
            }
        }
        #expect(reply == nil, "the server answered a handshake message that carried a payload")
    }
}

/// Issue 14, finding 7: a client checks who answered as soon as message 2 shows it, and
/// sends nothing more to an impostor (such as a spoofed mDNS answer): its own static key,
/// in message 3, never reaches it.
@Suite struct ImpostorTests {
    @Test func theClientRevealsNothingToAnImpostor() async throws {
        let holders = try Holders(["alice", "bob"], shareCount: 2)
        let impostor = try PairingProtocolTests.stranger("not-bob")
        let (messages, sink) = AsyncStream.makeStream(of: Int.self)
        let (ports, ready) = AsyncStream.makeStream(of: Int.self)
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0) { SecureChannel.configure($0) }
        ready.yield(listener.channel.localAddress!.port!)
        let serving = Task {
            // However the serving ends, the stream ends with it: a failure here must fail
            // the test below, not leave it waiting for ever.
            defer { sink.finish() }
            try await listener.executeThenClose { connections in
                for try await connection in connections {
                    try await connection.executeThenClose { inbound, outbound in
                        let handshake = NoiseHandshake(initiator: false, identitySecret: impostor.agreementSecretKey)
                        var frames = inbound.makeAsyncIterator()
                        guard let first = try await frames.next() else { return }
                        _ = try handshake.readMessage(Array(first.readableBytesView))
                        try await outbound.write(ByteBuffer(bytes: try handshake.writeMessage()))
                        sink.yield(2)
                        // Message 3 would carry the client's static key.
                        if (try? await frames.next()) != nil { sink.yield(3) }
                        sink.finish()
                    }
                    return
                }
            }
        }
        defer { serving.cancel() }
        var portIterator = ports.makeAsyncIterator()
        let port = await portIterator.next()!
        await #expect(throws: NetError.unexpectedPeer(expected: "bob")) {
            try await PeerClient.deliver(bundleAt: holders.temporary.file("b1.vshare"), to: holders.peer("bob", at: 0),
                                         at: try PeerAddress("127.0.0.1:\(port)"), identity: holders.identities[0])
        }
        var seen: [Int] = []
        for await message in messages { seen.append(message) }
        #expect(seen == [2], "the impostor received message 3")
    }
}
