import Testing
import VaultCore
@testable import VaultRelayClient

/// What a take of a group's record that failed remembers, by whose doing it failed
/// (Docs/RELAY.md, "Joining a group").
struct TakeFailureTests {
    @Test func onlyTheRecordsOwnFaultsAreRemembered() throws {
        let owner = Identity.generate(label: try Label("alice")).0
        let member = Identity.generate(label: try Label("bob")).0
        let relayCard = Identity.generate(label: try Label("r1")).0.card
        let relay = GroupRecord.Relay(name: try Label("r1"), url: "http://127.0.0.1:9", card: relayCard)
        let other = GroupRecord.Relay(name: try Label("r2"), url: "http://127.0.0.1:10", card: Identity.generate(label: try Label("r2")).0.card)
        let id = SecureRandom().bytes(16)
        let record = try GroupRecord(id: id, version: 3, name: Label("garden"), owner: owner.card, relays: [relay, other],
                                     members: [GroupRecord.Member(label: owner.label, card: owner.card),
                                               GroupRecord.Member(label: member.label, card: member.card)],
                                     signer: owner).encoded
        let connection = RelayConnection(relay, identity: member)
        // The relay listed version 7.
        func refusal(_ error: VaultError, bytes: [UInt8] = record) -> GroupRefusal? {
            Messenger.refusal(of: id, version: 7, ownerKey: owner.card.signingKey, bytes: bytes, error: error, from: connection)
        }

        // The owner's record, not one to take: at every relay, up to its own version.
        let invalid = refusal(.notForThisIdentity(what: "the group record"))
        #expect(invalid?.reason == .invalid && invalid?.version == 3)
        #expect(refusal(.malformed(what: "the group record", detail: "it is older than the version you left"))?.reason == .invalid)
        #expect(refusal(.untrustedOwner(fingerprint: owner.card.fingerprint))?.reason == .untrusted)
        // The owner's record, which this machine could not keep: nothing remembered.
        #expect(refusal(.storage("cannot write the keystore: the disk is full")) == nil)
        #expect(refusal(.storage("cannot use the keystore: database is locked")) == nil)
        #expect(refusal(.keystoreCorrupt("not a database")) == nil)
        // Anything else the relay served: its damage, there only, up to the version it listed.
        let damaged = refusal(.malformed(what: "the group record", detail: "not a vault group record"), bytes: Array("not a record".utf8))
        #expect(damaged?.reason == .damaged && damaged?.version == 7 && damaged?.relayCard == relayCard)
    }
}
