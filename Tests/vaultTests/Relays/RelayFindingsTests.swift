import Foundation
import GRDB
import Testing
@testable import VaultCore
import VaultRelayProtocol
import VaultTestSupport

/// Issue 37, "The relay formats, read by someone else", where a relay process decides:
/// each finding against real relays (RelayWorld). The format rules themselves are in
/// VaultCoreTests' RelayFormatTests.
@Suite(.serialized) struct RelayFindingsTests {
    /// The disagreement, at a relay: a correctly signed record whose URL ends in `/` was
    /// refused `400 malformed` in words that named no rule. It still is refused (a record
    /// has one encoding, FORMAT §16), and the words say why.
    @Test func aRecordWithATrailingSlashIsRefusedByName() throws {
        let world = try RelayWorld()
        let alice = try world.alice.signingIdentity()
        let r1 = try OwnRelay(world, 1), r2 = try OwnRelay(world, 2)
        let id = SecureRandom().bytes(16)
        var w = ByteWriter()
        w.raw(id)
        w.u64(1)
        w.string8("slash")
        w.raw(alice.card.encoded)
        w.u8(2)
        for (name, url, card) in [("r1", world.urls[0] + "/", r1.card), ("r2", world.urls[1], r2.card)] {
            w.string8(name)
            w.string16(url)
            w.raw(card.encoded)
        }
        w.u8(1)
        w.string8(alice.label.value)
        w.raw(alice.card.encoded)
        let record = SignedFrame.make(magic: GroupRecord.magic, version: GroupRecord.formatVersion, body: w.bytes,
                                      domain: GroupRecord.signatureDomain, signer: alice)
        let refused = try r1.put(as: alice, "/v1/groups/\(id.hex)", body: record)
        #expect(refused.status == 400 && refused.code == "malformed", "\(refused)")
        let words = try JSONDecoder().decode(RelayAPI.Failure.self, from: Data(refused.body)).error
        #expect(words.contains("a relay URL in a group record has no trailing /"), "\(words)")
    }

    /// A share's first bytes, signed by alice, with the header given; for the team.
    func prefix(_ world: RelayWorld, sequence: UInt64 = 1, created: UInt64, expires: UInt64) throws -> (id: String, bytes: [UInt8]) {
        let alice = try world.alice.signingIdentity(), bob = try world.bob.signingIdentity()
        let id = SecureRandom().bytes(16)
        let header = MessageHeader(messageID: id, groupID: [UInt8](hexID: try world.groupID())!, sender: alice.card, kind: .content,
                                   type: .note, createdAt: created, expiresAt: expires, deleteWhenConfirmed: false, threshold: 2, count: 3,
                                   index: 1, ciphertextLength: 1000, senderKey: SecureRandom().bytes(32),
                                   recipients: [MessageRecipient(card: bob.card, sequence: sequence)],
                                   commitments: (0..<3).map { _ in SecureRandom().bytes(32) })
        return (id.hex, MessageShare.prefix(header: header, signer: alice))
    }

    /// Nothing refused a content message numbered 0; a relay does now, from its header.
    /// And a share made past the relay's clock window (10 days ahead, living a day) was
    /// taken everywhere; a relay refuses it now, naming how far ahead it is.
    @Test func aRelayRefusesNumber0AndSharesFromTheFuture() throws {
        let world = try RelayWorld()
        let r1 = try OwnRelay(world, 1)
        let alice = try world.alice.signingIdentity()
        let team = try world.groupID()
        let now = UInt64(Date().timeIntervalSince1970)
        let zero = try prefix(world, sequence: 0, created: now, expires: now + 3600)
        let refused = try r1.put(as: alice, "/v1/groups/\(team)/messages/\(zero.id)", body: zero.bytes)
        #expect(refused.status == 400 && refused.text.contains("a content message is numbered from 1"), "\(refused)")
        let ahead = try prefix(world, created: now + 10 * 86400, expires: now + 11 * 86400)
        let future = try r1.put(as: alice, "/v1/groups/\(team)/messages/\(ahead.id)", body: ahead.bytes)
        #expect(future.status == 400 && future.text.contains("the message says it was made 10 days from now"), "\(future)")
        let inverted = try prefix(world, created: now + 3600, expires: now + 60)
        let backwards = try r1.put(as: alice, "/v1/groups/\(team)/messages/\(inverted.id)", body: inverted.bytes)
        #expect(backwards.status == 400 && backwards.text.contains("it expires before it was created"), "\(backwards)")
    }

    /// The paging cursor `next` was a JSON string while `after` and `last` are integers: it
    /// is a number now; a client still reads the string an older relay sends.
    @Test func theCursorIsANumber() throws {
        let world = try RelayWorld()
        for n in 1...2 { try world.alice.ok("send", "--group", "team", "-", stdin: "m\(n)") }
        let bob = try world.bob.signingIdentity()
        let page = try OwnRelay(world, 1).get(as: bob, "/v1/messages?limit=1").text
        let next = try #require(page.range(of: "\"next\":")).upperBound
        #expect(page[next...].first?.isNumber == true, "\(page)")
        let old = try JSONDecoder().decode(RelayAPI.Messages.self, from: Data("{\"messages\":[],\"next\":\"42\",\"last\":42}".utf8))
        #expect(old.next == 42)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(RelayAPI.Messages.self, from: Data("{\"messages\":[],\"next\":\"4x\"}".utf8))
        }
    }

    /// Whether a confirmed share without delete-when-read is still served was unsaid: it is,
    /// to its recipients, until it expires; with delete-when-read it is gone once every
    /// recipient confirmed.
    @Test func aConfirmedShareIsServedUnlessItAskedToBeDeleted() async throws {
        let world = try RelayWorld()
        let kept = try world.alice.ok("send", "--group", "team", "-", stdin: "kept").trimmingCharacters(in: .newlines)
        let dropped = try world.alice.ok("send", "--group", "team", "--delete-when-read", "-", stdin: "dropped")
            .trimmingCharacters(in: .newlines)
        _ = try world.bob.ok("receive")
        let team = try world.groupID()
        for i in 0..<3 {
            #expect(try await world.bobGet(relay: i, "/v1/groups/\(team)/messages/\(kept)") == 200)
            #expect(try await world.bobGet(relay: i, "/v1/groups/\(team)/messages/\(dropped)") == 404)
        }
    }

    /// CLI.md said `receive --out-dir` writes a key's 32 raw bytes and a contact "as it is":
    /// it writes hex and `field: value` lines, as `recover` shows them (CLI.md now says so).
    @Test func receiveOutDirWritesWhatCLISays() throws {
        let world = try RelayWorld()
        try world.alice.ok("send", "--group", "team", "--type", "key")
        try world.alice.ok("send", "--group", "team", "--type", "contact", "--contact-name", "Ana Lima", "--phone", "+351 1")
        let out = world.bob.directory.file("in")
        try world.bob.ok("receive", "--out-dir", out)
        let files = try FileManager.default.contentsOfDirectory(atPath: out).map { try String(contentsOfFile: out + "/" + $0, encoding: .utf8) }
        #expect(files.contains { $0.count == 65 && $0.dropLast().allSatisfy(\.isHexDigit) && $0.last == "\n" }, "\(files)")
        #expect(files.contains("name: Ana Lima\nphone: +351 1\n"), "\(files)")
    }
}
