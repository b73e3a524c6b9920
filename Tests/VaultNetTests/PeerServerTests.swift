import Foundation
import Testing
@testable import VaultCore
@testable import VaultNet
import VaultTestSupport

/// Holders in temporary keystores, all trusting each other, with one 2-of-3 secret shared
/// among the first three.
final class Holders: @unchecked Sendable {
    let temporary = TemporaryDirectory("vault-net")
    let keystores: [Keystore]
    let identities: [Identity]
    private(set) var secretID: [UInt8] = []

    init(_ labels: [String]) throws {
        let temporary = self.temporary
        keystores = try labels.map { try Keystore.create(home: VaultHome(directory: temporary.file($0)), label: Label($0), passphrase: nil) }
        identities = try keystores.map { try $0.unlock(passphrase: nil) }
        for (i, keystore) in keystores.enumerated() {
            for (j, identity) in identities.enumerated() where i != j {
                try keystore.addPeer(identity.card, label: identity.label, address: nil)
            }
        }
        let request = ShareRequest(type: .note, threshold: 2, holders: identities[1...2].map { (label: $0.label, card: $0.card) })
        let outputs = try (0..<3).map { try OutputFile(path: temporary.file("b\($0).vshare")) }
        var source = BytesSource(Array("the vault is in the basement".utf8))
        secretID = try SecretDealer.share(request, content: &source, dealer: identities[0], outputs: outputs)[0].secretID
        _ = try keystores[0].storeOwnBundle(at: outputs[0].path, identity: identities[0], name: nil)
        for j in 1...2 { try keystores[j].importBundles([outputs[j].path], identity: identities[j]) }
    }

    func secret(of holder: Int) throws -> StoredSecret { try keystores[holder].secrets()[0] }
    func peer(_ label: String, at holder: Int) throws -> Peer { try keystores[holder].peer(named: label) }
}

/// Runs `PeerServer` for holder `index` on a free loopback port for the test's duration.
func withServer<T>(_ holders: Holders, _ index: Int, _ body: (PeerAddress) async throws -> T) async throws -> T {
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let server = PeerServer(keystore: holders.keystores[index], identity: holders.identities[index], confirm: nil) { _ in }
    let task = Task { try await server.run(host: "127.0.0.1", port: 0) { continuation.yield($0) } }
    defer { task.cancel() }
    var iterator = ports.makeAsyncIterator()
    let port = await iterator.next()!
    return try await body(try PeerAddress("127.0.0.1:\(port)"))
}

/// Sends one piece request on an open channel and returns the answer's type and body.
func ask(_ channel: SecureChannel, _ request: PieceRequest) async throws -> (PeerMessageType, [UInt8]) {
    try await channel.send(.pieceRequest, request.encoded)
    let (type, length) = try await channel.receiveHeader()
    var body: [UInt8] = []
    try await channel.receiveBody(length) { body += $0 }
    return (type, body)
}

@Suite struct PeerServerTests {
    @Test func releasesToAHolderWhoProvesPossession() async throws {
        let holders = try Holders(["alice", "bob", "carol"])
        try await withServer(holders, 1) { address in
            let output = try OutputFile(path: holders.temporary.file("piece"))
            try await PeerClient.requestPiece(of: try holders.secret(of: 2), from: holders.peer("bob", at: 2), holderIndex: 2,
                                              at: address, identity: holders.identities[2], into: output)
            var recovered: [UInt8] = []
            _ = try SecretRecovery.recover(try holders.secret(of: 2), keystore: holders.keystores[2], identity: holders.identities[2],
                                           pieceFiles: [output.path], password: { throw VaultError.passwordRequired },
                                           output: { recovered += $0 })
            #expect(recovered == Array("the vault is in the basement".utf8))
        }
    }

    @Test func refusesAProofReplayedFromAnotherSession() async throws {
        let holders = try Holders(["alice", "bob", "carol"])
        let carol = holders.identities[2], secret = try holders.secret(of: 2), bob = try holders.peer("bob", at: 2)
        try await withServer(holders, 1) { address in
            let first = try await PeerClient.connect(to: bob, at: address, identity: carol) { channel in
                let proof = try PossessionProof.make(for: secret, identity: carol, holder: 2, handshakeHash: channel.handshakeHash)
                let request = PieceRequest(secretID: holders.secretID, requester: 3, holder: 2, proof: proof)
                #expect(try await ask(channel, request).0 == .piece)
                return request
            }
            // The same proof on a new channel: its handshake hash differs.
            let (type, body) = try await PeerClient.connect(to: bob, at: address, identity: carol) { try await ask($0, first) }
            #expect(type == .refused && body.first == RefusalCode.badProof.rawValue)
        }
    }

    @Test func refusesPeersWithoutTheirOwnShareAndTheHoldersIndex() async throws {
        let holders = try Holders(["alice", "bob", "carol", "dave"])
        let dave = holders.identities[3], bob = try holders.peer("bob", at: 3)
        try await withServer(holders, 1) { address in
            // dave is trusted but holds no share: claiming carol's index, with any proof, fails.
            let (type, body) = try await PeerClient.connect(to: bob, at: address, identity: dave) { channel in
                try await ask(channel, PieceRequest(secretID: holders.secretID, requester: 3, holder: 2, proof: [UInt8](repeating: 7, count: 64)))
            }
            #expect(type == .refused && body.first == RefusalCode.badProof.rawValue)
            // A request for the holder's own index.
            let (sameType, sameBody) = try await PeerClient.connect(to: bob, at: address, identity: holders.identities[2]) { channel in
                try await ask(channel, PieceRequest(secretID: holders.secretID, requester: 2, holder: 2, proof: [UInt8](repeating: 0, count: 64)))
            }
            #expect(sameType == .refused && sameBody.first == RefusalCode.sameIndex.rawValue)
            // A secret the holder has no share of.
            let (unknownType, unknownBody) = try await PeerClient.connect(to: bob, at: address, identity: holders.identities[2]) { channel in
                try await ask(channel, PieceRequest(secretID: [UInt8](repeating: 1, count: 16), requester: 3, holder: 2, proof: [UInt8](repeating: 0, count: 64)))
            }
            #expect(unknownType == .refused && unknownBody.first == RefusalCode.unknownSecret.rawValue)
        }
    }

    @Test func refusesUntrustedKeys() async throws {
        let holders = try Holders(["alice", "bob", "carol"])
        let eve = try Identity(label: Label("eve"), card: nil, secret: SecureBytes.random(count: 64))
        try await withServer(holders, 1) { address in
            // The refusal comes right after the handshake, before eve sends anything.
            let (type, body) = try await PeerClient.connect(to: holders.peer("bob", at: 2), at: address, identity: eve) {
                try await $0.receive()
            }
            #expect(type == .refused && body.first == RefusalCode.untrusted.rawValue)
        }
    }

    @Test func rateLimitsPieceRequests() async throws {
        let holders = try Holders(["alice", "bob", "carol"])
        try await withServer(holders, 1) { address in
            for attempt in 1...(NetLimits.pieceRequestsPerMinute + 1) {
                let output = try OutputFile(path: holders.temporary.file("p\(attempt)"))
                let request = { try await PeerClient.requestPiece(of: try holders.secret(of: 2), from: holders.peer("bob", at: 2), holderIndex: 2,
                                                                  at: address, identity: holders.identities[2], into: output) }
                if attempt <= NetLimits.pieceRequestsPerMinute {
                    try await request()
                } else {
                    await #expect(throws: NetError.refused(.rateLimited, "")) { try await request() }
                }
            }
        }
    }

    @Test func refusesAnImpostorAtAPeersAddress() async throws {
        let holders = try Holders(["alice", "bob", "carol"])
        // carol's server, reached as if it were bob.
        try await withServer(holders, 2) { address in
            await #expect(throws: NetError.unexpectedPeer(expected: "bob")) {
                try await PeerClient.deliver(bundleAt: holders.temporary.file("b1.vshare"), to: holders.peer("bob", at: 0),
                                             at: address, identity: holders.identities[0])
            }
        }
    }
}
