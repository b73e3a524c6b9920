import Foundation
import Testing
@testable import VaultCore
import VaultTestSupport

/// Issue 18 (security finding 4): key shares are sealed with one-time sender keys, so a
/// sender's long-term secret key opens nothing it sealed. With `crypto_box` from the
/// sender's long-term key, both ends share one key, and the sender's keystore alone opened
/// every bundle it ever dealt (its outbox, `--out-dir` files, captured traffic).
@Suite struct OneTimeSealTests {
    /// The body of a bundle or release file: nonce ‖ box, at `offset`.
    static func box(_ path: String, at offset: Int) throws -> [UInt8] {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        return Array(bytes[offset..<offset + ShareBundle.bodyPrefixLength])
    }

    @Test func theDealersSecretKeyOpensNoBundle() throws {
        let deal = try CraftedDeal()
        let alice = deal.identities[0], bob = deal.identities[1]
        let request = ShareRequest(type: .note, threshold: 2, holders: [(bob.label, bob.card), (deal.identities[2].label, deal.identities[2].card)])
        let outputs = try (1...3).map { try OutputFile(path: deal.temporary.file("b\($0).vshare")) }
        let source = BytesSource(Array("the combination is 4-8-15-16".utf8))
        let headers = try SecretDealer.share(request, content: source, dealer: alice, outputs: outputs)
        try outputs.forEach { try $0.commit() }
        let header = headers[1]
        let prefixLength = ShareBundle.prefix(header: header, signer: alice).count
        let box = try Self.box(outputs[1].path, at: prefixLength)
        // The holder opens it, from the one-time key in the signed header.
        #expect(throws: Never.self) { try ShareBundle.openBox(box, header: header, holder: bob) }
        #expect(header.senderKey != alice.card.agreementKey)
        // The dealer cannot: not as the v1 format allowed (its secret key with the holder's
        // public key), nor from the one-time key.
        #expect(Box.open(box, from: bob.card.agreementKey, to: alice) == nil)
        #expect(Box.open(box, from: header.senderKey, to: alice) == nil)
        // Every bundle has its own one-time key.
        #expect(Set(headers.map(\.senderKey)).count == 3)
    }

    @Test func theSendersSecretKeyOpensNoReleasedPiece() throws {
        let deal = try CraftedDeal()
        let bundles = try deal.deal(outer: StrictParsingTests.note)
        var released: String?
        _ = try deal.recover(bundles, release: { released = $0; return $0 })
        let path = try #require(released)
        let carol = deal.identities[2], bob = deal.identities[1]
        let stored = try deal.keystores[1].secrets()[0]
        let opened = try ReleasedPiece.open(path: path, secret: stored.header, identity: bob)
        let box = try Self.box(path, at: 9 + ReleasedPiece.headerLength + 64)
        #expect(Box.open(box, from: opened.header.oneTimeKey, to: bob) != nil)
        #expect(Box.open(box, from: bob.card.agreementKey, to: carol) == nil)
        #expect(Box.open(box, from: opened.header.oneTimeKey, to: carol) == nil)
    }

    /// A release whose header was altered after its sender signed it is set aside, and no
    /// sender is named.
    @Test func anAlteredReleaseHeaderIsSetAside() throws {
        let deal = try CraftedDeal()
        let bundles = try deal.deal(outer: StrictParsingTests.note)
        var outcomes: [PieceOutcome] = []
        #expect(throws: VaultError.self) {
            _ = try deal.recover(bundles, release: { honest in
                var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: honest)))
                // The one-time key's last byte: 9 + 16 + 1 + 1 + 65 + 32 + 31.
                bytes[9 + 16 + 1 + 1 + KeyCard.encodedLength + 32 + 31] ^= 1
                return try deal.temporary.write("altered.vpiece", bytes)
            }, verified: { outcomes.append($0) })
        }
        let released = outcomes.first { $0.index == 3 }
        #expect(released?.sender == nil)
        #expect(released?.problem == "damaged: its sender's signature does not verify")
    }

    /// v1 files, from before the format was released, are refused by version, in words.
    @Test func aVersion1BundleIsRefusedByItsVersion() throws {
        let deal = try CraftedDeal()
        let bundles = try deal.deal(outer: StrictParsingTests.note)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: bundles[1])))
        bytes[4] = 1
        let old = try deal.temporary.write("old.vshare", bytes)
        #expect(throws: VaultError.inFile(path: old, .unsupportedVersion(what: "the share bundle", version: 1, supported: 2))) {
            try deal.keystores[1].importBundles([old], identity: deal.identities[1])
        }
        #expect(VaultError.unsupportedVersion(what: "the share bundle", version: 1, supported: 2).description
            == "the share bundle is in format version 1, and this vault reads version 2 only")
    }
}
