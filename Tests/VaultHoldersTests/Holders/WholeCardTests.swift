import Foundation
import Testing
@testable import VaultCore
@testable import VaultHolders
import VaultTestSupport

/// Finding L2 of this round's security review: a group owner could list a member made of
/// its own Ed25519 key and bob's X25519 key, and its answers were then taken as bob's
/// (`vault secrets show` said bob "declined"). A record refuses an X25519 key listed twice,
/// and answers are matched by the whole trusted card.
@Suite struct WholeCardTests {
    let temporary = TemporaryDirectory("vault-whole-card")
    let alice = Identity.generate(label: try! Label("alice")).0
    let bob = Identity.generate(label: try! Label("bob")).0
    let mallory = Identity.generate(label: try! Label("mallory")).0

    /// bob's X25519 key with mallory's signing key.
    var forged: KeyCard { KeyCard(agreementKey: bob.card.agreementKey, signingKey: mallory.card.signingKey) }

    func relays() -> [GroupRecord.Relay] {
        (0..<2).map { i in
            GroupRecord.Relay(name: try! Label("r\(i)"), url: "http://127.0.0.1:\(21000 + i)",
                              card: Identity.generate(label: try! Label("r"), random: SecureRandom()).0.card)
        }
    }

    /// The review's record: its owner's card is mallory's signing key with bob's X25519 key
    /// (the record is signed by that signing key), and bob is listed too, with his own card.
    /// Written by hand (vault's own writer checks the same rules first), signed by mallory.
    @Test func aRecordRefusesAnAgreementKeyListedTwice() throws {
        var w = ByteWriter()
        w.raw(SecureRandom().bytes(16))
        w.u64(1)
        w.string8("team")
        w.raw(forged.encoded)
        let relays = relays()
        w.u8(UInt8(relays.count))
        for relay in relays {
            w.string8(relay.name.value)
            w.string16(relay.url)
            w.raw(relay.card.encoded)
        }
        w.u8(2)
        for (label, card) in [("mallory", forged), ("bob", bob.card)] {
            w.string8(label)
            w.raw(card.encoded)
        }
        let record = SignedFrame.make(magic: GroupRecord.magic, version: GroupRecord.formatVersion, body: w.bytes,
                                      domain: GroupRecord.signatureDomain, signer: mallory)
        do {
            _ = try GroupRecord(parsing: record)
            Issue.record("a record listing bob's X25519 key twice was taken")
        } catch {
            #expect("\(error)".contains("a member appears twice"), "\(error)")
        }
    }

    /// alice offered bob a share; an answer from the forged card (bob's X25519 key, another
    /// signing key) changes nothing, and bob's own answer is taken.
    @Test func aShareAnswerCountsOnlyFromTheWholeCard() throws {
        let keystore = try Keystore.create(home: VaultHome(directory: temporary.file("alice")), label: Label("alice"), passphrase: nil)
        let dealer = try keystore.unlock(passphrase: nil)
        try keystore.addPeer(bob.card, label: bob.label, address: nil)
        let secretID = SecureRandom().bytes(16), row = BundleHeader.rowID(dealer: dealer.card, secretID: secretID)
        try keystore.setDelivery(secretRow: row, holderKey: bob.card.agreementKey, label: "bob", state: .sent, via: "relays of team")
        guard case .refused = try RecoveryDesk.take(shareAnswer: secretID, state: .refused, from: forged, keystore: keystore, identity: dealer) else {
            Issue.record("an answer from a card that is not bob's was taken as bob's")
            return
        }
        #expect(try keystore.deliveries(secretRow: row).first?.state == .sent)
        guard case .delivery(_, _, .delivered) = try RecoveryDesk.take(shareAnswer: secretID, state: .stored, from: bob.card, keystore: keystore,
                                                                      identity: dealer) else {
            Issue.record("bob's own answer was not taken")
            return
        }
    }

    /// The same for an answer to the dealer's emergency rule.
    @Test func aRoleAnswerCountsOnlyFromTheWholeCard() throws {
        let keystore = try Keystore.create(home: VaultHome(directory: temporary.file("alice")), label: Label("alice"), passphrase: nil)
        let dealer = try keystore.unlock(passphrase: nil)
        try keystore.addPeer(bob.card, label: bob.label, address: nil)
        let secretID = SecureRandom().bytes(16), row = BundleHeader.rowID(dealer: dealer.card, secretID: secretID)
        let rule = try EmergencyRule.make(secretID: secretID, dealer: dealer, trustee: mallory.card, wait: 60, issued: 100)
        try keystore.setEmergencyRule(rule, role: .dealt)
        try keystore.setRole(secretRow: row, holderKey: bob.card.agreementKey, label: "bob", issued: 100, state: .sent, via: "relays of team")
        #expect(try EmergencyDesk.take(roleAnswer: secretID, issued: 100, state: .declined, from: forged, keystore: keystore, identity: dealer) == nil)
        #expect(try keystore.emergencyRoles(secretRow: row).first?.state == .sent)
        #expect(try EmergencyDesk.take(roleAnswer: secretID, issued: 100, state: .accepted, from: bob.card, keystore: keystore,
                                       identity: dealer)?.state == .accepted)
    }
}
