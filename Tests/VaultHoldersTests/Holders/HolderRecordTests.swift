import Foundation
import Testing
@testable import VaultCore
@testable import VaultHolders

/// FORMAT §20: holder records and the piece request through relays, read strictly.
@Suite struct HolderRecordTests {
    let requester = Identity.generate(label: try! Label("alice-new")).0
    let holder = Identity.generate(label: try! Label("bob")).0
    let dealer = Identity.generate(label: try! Label("alice")).0

    func request(lifetime: UInt64 = 3600, now: UInt64 = 1_800_000_000) throws -> RelayPieceRequest {
        try RelayPieceRequest.make(secretID: Array(repeating: 7, count: 16), dealer: dealer.card, holder: holder.card, own: nil,
                                   identity: requester, replyKey: ReplyKey().publicKey, lifetime: lifetime, now: now)
    }

    func head(_ bytes: [UInt8]) throws -> HolderRecord.Head {
        var source = BytesSource(bytes)
        return try HolderRecord.readHead(&source)
    }

    @Test func aRequestRoundTripsAndIsBoundToItsSigner() throws {
        let made = try request()
        let bytes = made.encoded()
        #expect(bytes.count == 404)
        #expect(try RelayPieceRequest(parsing: bytes) == made)
        #expect(made.holdsNoShare && made.holder == holder.card && made.requesterCard == requester.card)
        // Any byte changed breaks the requester's signature (or the layout before it).
        for offset in [0, 20, 100, 200, 276, 300, 403] {
            var altered = bytes
            altered[offset] ^= 1
            #expect(throws: VaultError.self) { try RelayPieceRequest(parsing: altered) }
        }
        #expect(throws: VaultError.self) { try RelayPieceRequest(parsing: bytes + [0]) }
        #expect(throws: VaultError.self) { try RelayPieceRequest(parsing: Array(bytes.dropLast())) }
    }

    /// A reply key of small order would make the holder's box fail (its process trapped
    /// once): refused when the request is read.
    @Test func aReplyKeyOfSmallOrderIsRefused() throws {
        let made = try RelayPieceRequest.make(secretID: Array(repeating: 7, count: 16), dealer: dealer.card, holder: holder.card, own: nil,
                                              identity: requester, replyKey: Array(repeating: 0, count: 32), lifetime: 3600)
        #expect(throws: VaultError.self) { try RelayPieceRequest(parsing: made.encoded()) }
        // And a holder's "waiting until" past what a keystore keeps.
        #expect(throws: VaultError.self) {
            try head([1, 4] + Array(repeating: 5, count: 16) + [4] + Array(repeating: 0xff, count: 8) + Array(repeating: 0, count: 512 - 27))
        }
    }

    @Test func aRequestLivesAtMostAWeek() throws {
        #expect(try request(lifetime: 30 * 86_400).expires - 1_800_000_000 == RelayPieceRequest.maximumLifetime)
    }

    @Test func recordsRoundTripAndRefuseWhatIsNotTheirs() throws {
        let made = try request()
        guard case .pieceRequest(let parsed) = try head(HolderRecord.pieceRequest(made)) else { Issue.record("not a request"); return }
        #expect(parsed == made)
        guard case .shareAnswer(let id, 3, .waiting) = try head(HolderRecord.shareAnswer(secretID: Array(repeating: 1, count: 16), holder: 3,
                                                                                        state: .waiting)) else {
            Issue.record("not a share answer"); return
        }
        #expect(id == Array(repeating: 1, count: 16))
        let nonce = Array(repeating: UInt8(5), count: 16)
        for outcome: PieceAnswer in [.denied, .timedOut, .waiting(request: nil, until: 42), .waiting(request: "0a1b2c3d", until: 42), .refused(.replayed)] {
            guard case .pieceAnswer(let n, let read, nil) = try head(HolderRecord.pieceAnswer(nonce: nonce, outcome: outcome)) else {
                Issue.record("not an answer"); continue
            }
            #expect(n == nonce && read == outcome)
        }
        // Strict: another version, an unknown kind or outcome or refusal, bytes after the end.
        #expect(throws: VaultError.self) { try head([2, 3] + made.encoded()) }
        #expect(throws: VaultError.self) { try head([1, 9]) }
        #expect(throws: VaultError.self) { try head([1, 4] + nonce + [6]) }
        #expect(throws: VaultError.self) { try head([1, 4] + nonce + [5, 99]) }
        #expect(throws: VaultError.self) { try head(HolderRecord.pieceAnswer(nonce: nonce, outcome: .denied) + [0]) }
        #expect(throws: VaultError.self) { try head([1, 2] + Array(repeating: 1, count: 16) + [0, 1]) }
        // Every small record is 512 bytes, zeros after its fields: a relay cannot tell them apart.
        for record in [HolderRecord.pieceRequest(made), HolderRecord.pieceAnswer(nonce: nonce, outcome: .denied),
                       HolderRecord.shareAnswer(secretID: nonce, holder: 2, state: .stored)] {
            #expect(record.count == 512)
            #expect(throws: VaultError.self) { try head(Array(record.dropLast())) }
            var dirty = record
            dirty[511] = 1
            #expect(throws: VaultError.self) { try head(dirty) }
        }
        // A release's prefix is bounded before it is read.
        #expect(throws: VaultError.self) { try head([1, 4] + nonce + [1, 0xff, 0xff, 0xff, 0xff]) }
    }

    @Test func aReplyKeyOpensOnlyForItsIdentity() throws {
        let key = ReplyKey()
        let sealed = key.sealed(for: requester)
        #expect(ReplyKey.unsealed(sealed, publicKey: key.publicKey, identity: requester)?.publicKey == key.publicKey)
        #expect(ReplyKey.unsealed(sealed, publicKey: key.publicKey, identity: holder) == nil)
        // A row whose public half was swapped opens nothing.
        #expect(ReplyKey.unsealed(sealed, publicKey: ReplyKey().publicKey, identity: requester) == nil)
    }
}
