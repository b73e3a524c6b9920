import Foundation
import Testing
@testable import VaultCore
import VaultTestSupport

/// Issue 37, "The relay formats, read by someone else": an independent implementation of
/// FORMAT §15–§17 found one disagreement and a set of gaps. Each is a rule now, in the spec
/// and here; each test failed on the code before the rule.
@Suite struct RelayFormatTests {
    let deal: CraftedDeal
    init() throws { deal = try CraftedDeal() }

    var alice: Identity { deal.identities[0] }
    var bob: Identity { deal.identities[1] }
    var carol: Identity { deal.identities[2] }

    /// A record's body written by hand (what GroupRecord.init refuses to make), signed by alice.
    func signedRecord(urls: [String]) -> [UInt8] {
        var w = ByteWriter()
        w.raw([UInt8](repeating: 7, count: 16))
        w.u64(1)
        w.string8("team")
        w.raw(alice.card.encoded)
        w.u8(UInt8(urls.count))
        for (i, url) in urls.enumerated() {
            w.string8("r\(i)")
            w.string16(url)
            w.raw(Identity.generate(label: try! Label("r"), random: SecureRandom()).0.card.encoded)
        }
        w.u8(1)
        w.string8(alice.label.value)
        w.raw(alice.card.encoded)
        return SignedFrame.make(magic: GroupRecord.magic, version: GroupRecord.formatVersion, body: w.bytes,
                                domain: GroupRecord.signatureDomain, signer: alice)
    }

    /// The disagreement: §16 said a reader accepts a URL with a trailing `/`, while the
    /// re-encoding rule (and vault) refused it, in words that named no rule. The rule now: a
    /// record has one encoding, without the `/`, and the refusal says so.
    @Test func aRecordURLWithATrailingSlashIsRefusedByName() throws {
        #expect(throws: Never.self) { try GroupRecord(parsing: signedRecord(urls: ["http://127.0.0.1:7780", "http://127.0.0.1:7781"])) }
        do {
            _ = try GroupRecord(parsing: signedRecord(urls: ["http://127.0.0.1:7780", "http://127.0.0.1:7781/"]))
            Issue.record("a record with a trailing / was accepted")
        } catch {
            #expect("\(error)".contains("a relay URL in a group record has no trailing /"), "\(error)")
        }
        // Typed by a person, the / is dropped.
        #expect(try RelayURL.check("http://127.0.0.1:7781/") == "http://127.0.0.1:7781")
    }

    /// Relay URLs were left to Foundation, which accepted an empty port, port 99999, and
    /// hosts other parsers read as other addresses. Each is refused now, in words.
    @Test(arguments: [
        "http://127.0.0.1:", "http://127.0.0.1:99999", "http://127.0.0.1:0", "http://127.0.0.1:07780", "http://127.0.0.1:+80",
        "http://[fe80::1%25eth0]:7780", "http://[fe80::1%eth0]", "http://[::1", "http://[::g]", "http://::1:7780",
        "http://0127.0.0.1", "http://127.1", "http://127.0.0.256", "http://1.2.3.4.5", "http://example.123",
        "http://bücher.example", "http://exa mple.org", "http://example..org", "http://-x.example", "http://x-.example",
        "http://example.org.", "http://ex%41mple.org", "http://u@example.org", "https://example.org/path", "https://example.org?x",
        "https://example.org#x", "ftp://example.org", "example.org:7780", "http://" + String(repeating: "a", count: 64) + ".org",
    ])
    func aRelayURLIsReadOneWay(url: String) {
        #expect(throws: VaultError.self, "\(url)") { try RelayURL.check(url) }
    }

    @Test(arguments: [
        "http://127.0.0.1:7780", "https://relay.example.org", "http://[::1]:7780", "https://[2001:db8::1]", "HTTPS://Relay.Example.org:443",
        "http://xn--bcher-kva.example", "http://localhost:1", "http://10.0.0.1:65535", "http://0.0.0.0",
    ])
    func aGoodRelayURLIsTaken(url: String) throws {
        #expect(try RelayURL.check(url) == url)
        #expect(try RelayURL.check(url + "/") == url)
    }

    /// A share signed by alice with the header given, as a relay or recipient reads it.
    func read(_ header: MessageHeader) throws {
        let prefix = MessageShare.prefix(header: header, signer: alice)
        var incoming = IncomingMessageShare(maximumLength: 1 << 20)
        try prefix.withUnsafeBytes { try incoming.take($0) }
    }

    func header(kind: MessageHeader.Kind = .content, sequence: UInt64 = 1, created: UInt64, expires: UInt64) -> MessageHeader {
        MessageHeader(messageID: SecureRandom().bytes(16), groupID: SecureRandom().bytes(16), sender: alice.card, kind: kind, type: .note,
                      createdAt: created, expiresAt: expires, deleteWhenConfirmed: false, threshold: 2, count: 3, index: 1,
                      ciphertextLength: 1000, senderKey: SecureRandom().bytes(32),
                      recipients: [MessageRecipient(card: bob.card, sequence: sequence)],
                      commitments: (0..<3).map { _ in SecureRandom().bytes(32) })
    }

    /// Nothing refused a content message numbered 0, which a recipient then took outside
    /// the numbering ("received #0"): never a repeat, never a gap.
    @Test func aContentMessageNumbered0IsRefused() throws {
        let now = UInt64(Date().timeIntervalSince1970)
        #expect(throws: Never.self) { try read(header(sequence: 1, created: now, expires: now + 60)) }
        #expect(throws: VaultError.malformed(what: "the message share", detail: "a content message is numbered from 1 for each recipient")) {
            try read(header(sequence: 0, created: now, expires: now + 60))
        }
        #expect(throws: Never.self) { try read(header(kind: .resendRequest, sequence: 0, created: now, expires: now + 60)) }
        let request = MessageRequest(groupID: SecureRandom().bytes(16), type: .note, threshold: 2,
                                     recipients: [MessageRecipient(card: bob.card, sequence: 0)], lifetime: 60, deleteWhenConfirmed: false)
        let outputs = try (1...3).map { try OutputFile(path: deal.temporary.file("zero-\($0)")) }
        #expect(throws: VaultError.self) { try MessageDealer.deal(request, content: BytesSource([1]), sender: alice, outputs: outputs) }
    }

    /// No rule linked `created` to `expires` or to the clock: a share made 10 days ahead that
    /// expires in 1 day was accepted everywhere. A share now expires after it was made
    /// (parsers), and one made past the clocks' window is refused by relays and recipients.
    @Test func createdComesBeforeExpiresAndNotAfterTheClock() throws {
        let now = UInt64(Date().timeIntervalSince1970)
        #expect(throws: VaultError.malformed(what: "the message share", detail: "it expires before it was created")) {
            try read(header(created: now + 10 * 86400, expires: now + 86400))
        }
        #expect(throws: VaultError.self) { try read(header(created: now, expires: now)) }
        // Made 10 days ahead and living 1 day: it parses, and the clock refuses it.
        let ahead = header(created: now + 10 * 86400, expires: now + 11 * 86400)
        let prefix = MessageShare.prefix(header: ahead, signer: alice)
        var incoming = IncomingRelayMessage(maximumLength: 1 << 20)
        try prefix.withUnsafeBytes { try incoming.take($0) }
        #expect(throws: VaultError.self) { try incoming.checkCreated(now: now, slack: 600) }
        #expect(throws: Never.self) { try incoming.checkCreated(now: now + 10 * 86400, slack: 600) }
    }

    /// A recipient's box was found by its X25519 key alone: a share naming bob's X25519 key
    /// under another Ed25519 key (which the relays serve it to) opened for bob. A recipient
    /// is its whole card now.
    @Test func aBoxUnderAnotherSigningKeyIsNotOpened() throws {
        let mallory = Identity.generate(label: try Label("mallory"), random: SecureRandom()).0
        let spliced = try KeyCard(encoded: [bob.card.encoded[0]] + bob.card.agreementKey + mallory.card.signingKey)
        let temporary = deal.temporary
        func dealt(to card: KeyCard, tag: String) throws -> [String] {
            let outputs = try (1...3).map { try OutputFile(path: temporary.file("\(tag)-\($0)")) }
            let request = MessageRequest(groupID: SecureRandom().bytes(16), type: .note, threshold: 2,
                                         recipients: [MessageRecipient(card: card, sequence: 1)], lifetime: 60, deleteWhenConfirmed: false)
            _ = try MessageDealer.deal(request, content: BytesSource(Array("hello".utf8)), sender: alice, outputs: outputs)
            for output in outputs { try output.commit() }
            return outputs.map(\.path)
        }
        #expect(throws: Never.self) { _ = try ReceivedShare(path: try dealt(to: bob.card, tag: "whole")[0], recipient: bob) }
        #expect(throws: VaultError.notForThisIdentity(what: "the message")) {
            _ = try ReceivedShare(path: try dealt(to: spliced, tag: "spliced")[0], recipient: bob)
        }
    }

    /// "Case-insensitive labels" named no mapping. It is Unicode's full lowercase mapping,
    /// scalar by scalar, without context or locale (Swift's `lowercased()`), on the NFC label;
    /// not case folding.
    @Test func labelsCompareByUnicodeLowercaseMapping() throws {
        #expect(try Label("ΟΔΟΣ").key == "οδοσ")       // no final-sigma rule
        #expect(try Label("Straße").key != Label("STRASSE").key) // no folding of ß to ss
        #expect(try Label("İstanbul").key == "i\u{307}stanbul")  // U+0130's full mapping, no Turkish rule
        #expect(try Label("ALICE").key == Label("alice").key)
    }

    /// Groups of up to 32 relays (Grouper's evaluation used 30): a record of 32 round trips,
    /// one of 33 is refused, and a message dealt over 32 relays opens from any 3 shares.
    @Test func groupsOf32Relays() throws {
        func record(_ count: Int) throws -> GroupRecord {
            try GroupRecord(id: [UInt8](repeating: 9, count: 16), version: 1, name: Label("wide"), owner: alice.card,
                            relays: (0..<count).map { i in
                                GroupRecord.Relay(name: try Label("r\(i)"), url: "http://127.0.0.1:\(20000 + i)",
                                                  card: Identity.generate(label: try Label("r"), random: SecureRandom()).0.card)
                            },
                            members: [GroupRecord.Member(label: alice.label, card: alice.card)], signer: alice)
        }
        let made = try record(32)
        #expect(try GroupRecord(parsing: made.encoded) == made)
        #expect(throws: VaultError.self) { try record(33) }
        let outputs = try (1...32).map { try OutputFile(path: deal.temporary.file("wide-\($0)")) }
        let request = MessageRequest(groupID: SecureRandom().bytes(16), type: .note, threshold: 3,
                                     recipients: [MessageRecipient(card: bob.card, sequence: 1)], lifetime: 60, deleteWhenConfirmed: false)
        let content = SecureRandom().bytes(100_000)
        _ = try MessageDealer.deal(request, content: BytesSource(content), sender: alice, outputs: outputs)
        for output in outputs { try output.commit() }
        let shares = try [4, 17, 31].map { try ReceivedShare(path: outputs[$0].path, recipient: bob) }
        var opened: [UInt8] = []
        _ = try MessageOpening.open(shares) { opened += $0 }
        #expect(opened == content)
    }
}
