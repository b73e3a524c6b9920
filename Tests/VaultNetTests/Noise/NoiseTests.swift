import Foundation
import Testing
import VaultCore
@testable import VaultNet
import VaultTestSupport

/// The cacophony vectors (Tests/VaultNetTests/Noise/Vectors, unchanged from ../shared/vectors/noise).
struct NoiseVector: Decodable, CustomTestStringConvertible {
    let protocol_name: String
    let init_prologue: String
    let init_static: String?
    let init_ephemeral: String
    let init_remote_static: String?
    let resp_prologue: String
    let resp_static: String?
    let resp_ephemeral: String?
    let resp_remote_static: String?
    let handshake_hash: String
    let messages: [Message]

    struct Message: Decodable {
        let payload: String
        let ciphertext: String
    }

    var testDescription: String { protocol_name }

    static let all: [NoiseVector] = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Vectors/cacophony-25519-ChaChaPoly-BLAKE2b.json")
        struct File: Decodable { let vectors: [NoiseVector] }
        return try! JSONDecoder().decode(File.self, from: Data(contentsOf: url)).vectors
    }()
}

func secret(_ hex: String?) -> SecureBytes? { hex.map { SecureBytes(copying: hexBytes($0)) } }

@Suite struct NoiseVectorTests {
    @Test func coversAllFifteenPatterns() {
        #expect(Set(NoiseVector.all.map(\.protocol_name)).count == 15)
    }

    @Test(arguments: NoiseVector.all)
    func passesTheVector(vector: NoiseVector) throws {
        let name = vector.protocol_name.split(separator: "_")[1]
        let pattern = try #require(NoisePattern.all[String(name)])
        let initiator = NoiseHandshake(pattern: pattern, initiator: true, prologue: hexBytes(vector.init_prologue),
                                       staticSecret: secret(vector.init_static),
                                       remoteStatic: vector.init_remote_static.map(hexBytes),
                                       ephemeral: secret(vector.init_ephemeral))
        let responder = NoiseHandshake(pattern: pattern, initiator: false, prologue: hexBytes(vector.resp_prologue),
                                       staticSecret: secret(vector.resp_static),
                                       remoteStatic: vector.resp_remote_static.map(hexBytes),
                                       ephemeral: secret(vector.resp_ephemeral))
        var sessions: (NoiseSession, NoiseSession)?
        for (index, message) in vector.messages.enumerated() {
            let fromInitiator = pattern.isOneWay || index % 2 == 0
            if sessions == nil {
                let (sender, receiver) = fromInitiator ? (initiator, responder) : (responder, initiator)
                let ciphertext = try sender.writeMessage(payload: hexBytes(message.payload))
                #expect(ciphertext == hexBytes(message.ciphertext), "message \(index)")
                #expect(try receiver.readMessage(ciphertext) == hexBytes(message.payload), "message \(index)")
                #expect(initiator.handshakeHash == responder.handshakeHash)
                if initiator.isComplete && responder.isComplete {
                    #expect(initiator.handshakeHash == hexBytes(vector.handshake_hash))
                    sessions = (try initiator.session(), try responder.session())
                }
            } else {
                var (i, r) = sessions!
                let ciphertext = fromInitiator ? try i.seal(hexBytes(message.payload)) : try r.seal(hexBytes(message.payload))
                #expect(ciphertext == hexBytes(message.ciphertext), "transport message \(index)")
                let plaintext = fromInitiator ? try r.open(ciphertext) : try i.open(ciphertext)
                #expect(plaintext == hexBytes(message.payload))
                sessions = (i, r)
            }
        }
        #expect(sessions != nil)
    }
}

@Suite struct NoiseHandshakeTests {
    func pair() -> (NoiseHandshake, NoiseHandshake, SecureBytes, SecureBytes) {
        let a = SecureBytes.random(count: 32), b = SecureBytes.random(count: 32)
        return (NoiseHandshake(initiator: true, identitySecret: a), NoiseHandshake(initiator: false, identitySecret: b), a, b)
    }

    @Test func twoPeersAgreeAtEveryStepAndLearnEachOthersKeys() throws {
        let (alice, bob, a, b) = pair()
        let m1 = try alice.writeMessage()
        _ = try bob.readMessage(m1)
        #expect(alice.handshakeHash == bob.handshakeHash)
        let m2 = try bob.writeMessage(payload: Array("hello".utf8))
        #expect(try alice.readMessage(m2) == Array("hello".utf8))
        #expect(alice.handshakeHash == bob.handshakeHash)
        let m3 = try alice.writeMessage()
        _ = try bob.readMessage(m3)
        #expect(alice.isComplete && bob.isComplete && alice.handshakeHash == bob.handshakeHash)
        #expect(alice.remoteStatic == NoiseCrypto.publicKey(of: b))
        #expect(bob.remoteStatic == NoiseCrypto.publicKey(of: a))
        var (x, y) = (try alice.session(), try bob.session())
        #expect(try y.open(x.seal(Array("ping".utf8))) == Array("ping".utf8))
        #expect(try x.open(y.seal(Array("pong".utf8))) == Array("pong".utf8))
    }

    @Test func refusesTamperedTruncatedAndOutOfOrderMessages() throws {
        let (alice, bob, _, _) = pair()
        #expect(throws: NetError.outOfOrder) { try bob.writeMessage() }
        let m1 = try alice.writeMessage()
        #expect(throws: NetError.truncated) { try NoiseHandshake(initiator: false, identitySecret: .random(count: 32)).readMessage(Array(m1.prefix(10))) }
        _ = try bob.readMessage(m1)
        var m2 = try bob.writeMessage()
        m2[40] ^= 1
        #expect(throws: NetError.decryption) { try alice.readMessage(m2) }
        // A failed handshake stays failed.
        #expect(throws: NetError.outOfOrder) { try alice.writeMessage() }
    }

    @Test func refusesReplayedAndTamperedTransportMessages() throws {
        let (alice, bob, _, _) = pair()
        _ = try bob.readMessage(alice.writeMessage())
        _ = try alice.readMessage(bob.writeMessage())
        _ = try bob.readMessage(alice.writeMessage())
        var (x, y) = (try alice.session(), try bob.session())
        let first = try x.seal(Array("one".utf8))
        #expect(try y.open(first) == Array("one".utf8))
        #expect(throws: NetError.decryption) { try y.open(first) }
        var second = try x.seal(Array("two".utf8))
        second[0] ^= 1
        #expect(throws: NetError.decryption) { try y.open(second) }
        #expect(throws: NetError.tooLong) { try x.seal([UInt8](repeating: 0, count: 65520)) }
    }

    @Test func refusesASmallOrderKey() throws {
        let bob = NoiseHandshake(initiator: false, identitySecret: .random(count: 32))
        // An all-zero ephemeral key makes every DH output zero. XX's first message holds no
        // DH, so the responder finds out at its first one: ee, when it writes.
        _ = try bob.readMessage([UInt8](repeating: 0, count: 32))
        #expect(throws: NetError.weakKey) { try bob.writeMessage() }
    }
}
