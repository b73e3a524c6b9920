import Foundation
import Testing
@testable import VaultCore
import VaultTestSupport

/// Share bundles written once with fixed identities and committed under
/// Vectors/bundle-v2: every later build must still import them and recover the content.
/// `VAULT_WRITE_VECTORS=1 swift test --filter BundleVectorTests` writes them again, only
/// for a deliberate format change: in place while version 2 is unreleased and still
/// changing in steps (Docs/DECISIONS.md, "Format v2"), in a new directory once released.
@Suite(.serialized) struct BundleVectorTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Vectors/bundle-v2").path
    static let password = "vector password"
    /// 140000 bytes: several stream chunks and two stripes at k = 2.
    static let content = (0..<140_000).map { UInt8(truncatingIfNeeded: ($0 &* 131) ^ ($0 >> 7)) }

    let temporary = TemporaryDirectory("vault-vector")

    /// The three holders, from fixed seeds, each trusting the others.
    func keystores() throws -> [Keystore] {
        let labels = ["alice", "bob", "carol"]
        let keystores = try labels.map {
            try Keystore.create(home: VaultHome(directory: temporary.file($0)), label: Label($0), passphrase: nil,
                                random: SeededRandom(seed: "vault bundle vector v1 \($0)"))
        }
        let cards = try keystores.map { try $0.identityInfo() }
        for (i, keystore) in keystores.enumerated() {
            for (j, info) in cards.enumerated() where i != j { try keystore.addPeer(info.card, label: info.label, address: nil) }
        }
        return keystores
    }

    @Test func fixedIdentitiesAreStable() throws {
        let cards = try keystores().map { try $0.identityInfo().card.text }
        #expect(cards[1] == (try String(contentsOfFile: Self.directory + "/bob.card", encoding: .utf8))
            .trimmingCharacters(in: .whitespacesAndNewlines))
    }

    @Test func committedBundlesStillOpenAndRecombine() throws {
        let keystores = try keystores()
        if ProcessInfo.processInfo.environment["VAULT_WRITE_VECTORS"] == "1" { try write(keystores) }
        let bob = try keystores[1].unlock(passphrase: nil), carol = try keystores[2].unlock(passphrase: nil)
        let stored = try keystores[1].importBundles([Self.directory + "/bob.vshare"], identity: bob)[0]
        let carols = try keystores[2].importBundles([Self.directory + "/carol.vshare"], identity: carol)[0]
        #expect(stored.header.threshold == 2 && stored.header.count == 3 && stored.header.passwordProtected)
        #expect(stored.header.labels?.map(\.value) == ["alice", "bob", "carol"])
        let piece = try OutputFile(path: temporary.file("carol-for-bob"))
        try ReleasedPiece.release(carols, to: keystores[2].peer(named: "bob"), keystore: keystores[2], identity: carol, output: piece)
        try piece.commit()
        var recovered: [UInt8] = []
        let result = try SecretRecovery.recover(
            stored, keystore: keystores[1], identity: bob, pieceFiles: [piece.path],
            password: { SecureBytes(copying: Array(Self.password.utf8)) }, output: { recovered += $0 })
        #expect(result.metadata.fileName == "vector.bin")
        #expect(recovered == Self.content)
    }

    private func write(_ keystores: [Keystore]) throws {
        let alice = try keystores[0].unlock(passphrase: nil)
        let holders = try ["bob", "carol"].map { name in
            let peer = try keystores[0].peer(named: name)
            return (label: peer.label, card: peer.card)
        }
        let request = ShareRequest(type: .file, metadata: SecretMetadata(fileName: "vector.bin"), description: "bundle vector v2",
                                   threshold: 2, holders: holders, publishLabels: true,
                                   password: SecureBytes(copying: Array(Self.password.utf8)))
        let outputs = try ["alice", "bob", "carol"].map { try OutputFile(path: Self.directory + "/\($0).vshare", replace: true) }
        let source = BytesSource(Self.content)
        _ = try SecretDealer.share(request, content: source, dealer: alice, outputs: outputs, random: SeededRandom(seed: "vector deal"))
        try outputs.dropFirst().forEach { try $0.commit() }
        try (try keystores[1].identityInfo().card.text + "\n").write(toFile: Self.directory + "/bob.card", atomically: true, encoding: .utf8)
    }
}
