import Foundation
import Testing
@testable import VaultCore
@testable import VaultRelayClient
import VaultTestSupport

/// When a holder may release an ended emergency wait (security review H1): only after a
/// round that read through enough relays of every group it shares with the dealer that a
/// denial stored on two of them was among what it read.
@Suite struct RelayRoundTests {
    let holder = Identity.generate(label: try! Label("bob")).0
    let dealer = Identity.generate(label: try! Label("alice")).0

    func group(relays count: Int, members: [Identity]) throws -> GroupRecord {
        try GroupRecord(id: SecureRandom().bytes(16), version: 1, name: Label("g\(count)"), owner: members[0].card,
                        relays: (0..<count).map { i in
                            GroupRecord.Relay(name: try Label("r\(i)"), url: "http://127.0.0.1:\(22000 + i)",
                                              card: Identity.generate(label: try Label("r")).0.card)
                        },
                        members: members.map { GroupRecord.Member(label: $0.label, card: $0.card) }, signer: members[0])
    }

    @Test func aDenialOnTwoRelaysIsAmongWhatWasRead() throws {
        let three = try group(relays: 3, members: [dealer, holder]), two = try group(relays: 2, members: [dealer, holder])
        var round = RelayRound()
        #expect(!round.heardEverything(from: dealer.card, in: [three], identity: holder), "nothing read")
        round.read(three, relays: [2])
        #expect(!round.heardEverything(from: dealer.card, in: [three], identity: holder), "one of three: a denial on the other two is missed")
        round.read(three, relays: [0])
        #expect(round.heardEverything(from: dealer.card, in: [three], identity: holder), "two of three meet any two")
        // Every group shared with the dealer counts; one of two relays meets a message on both.
        #expect(!round.heardEverything(from: dealer.card, in: [three, two], identity: holder))
        round.read(two, relays: [1])
        #expect(round.heardEverything(from: dealer.card, in: [three, two], identity: holder))
        // A group without the dealer, or without this holder, is no way for a denial.
        let other = Identity.generate(label: try Label("carol")).0
        let without = try group(relays: 3, members: [other, holder])
        #expect(RelayRound().heardEverything(from: dealer.card, in: [without], identity: holder))
    }
}

/// A recovery through relays waiting for answers (issue 47): a `vault serve` beside it takes
/// the answers off the relays, which then say nothing new; the wait also looks at the
/// keystore, where the serve put them, and ends at once.
@Suite struct RecoveryWaitTests {
    @Test(.timeLimit(.minutes(10))) func anAnswerAnotherProcessTookEndsTheWait() async throws {
        let temporary = TemporaryDirectory("vault-recovery-wait")
        let keystore = try Keystore.create(home: VaultHome(directory: temporary.file("alice")), label: Label("alice"), passphrase: nil)
        let identity = try keystore.unlock(passphrase: nil)
        let bob = try keystore.addPeer(Identity.generate(label: try Label("bob")).0.card, label: Label("bob"), address: nil)
        let remote = try RemoteRecovery(dealer: identity.card, secretID: SecureRandom().bytes(16), own: nil, lifetime: 3600,
                                        keystore: keystore, identity: identity)
        let nonce = SecureRandom().bytes(16)
        try keystore.recordAsk(remote.recovery, nonce: nonce, holder: bob, groupID: Array(repeating: 5, count: 16))
        try remote.reload()
        // A deadline far away: the test asks why the wait ended, not how soon, so a loaded
        // machine that starves the task for minutes cannot make it fail.
        let until = Date().addingTimeInterval(3600)
        // In no group, the relays' part waits out its time: only the keystore can end it early.
        // (The wait compares with the recovery as last read, before this change.)
        async let waited = remote.waitForAnswers(until: until)
        try keystore.updateAsk(nonce: nonce, state: .waiting, until: UInt64(until.timeIntervalSince1970))
        #expect(await waited == .keystore, "the wait did not see the answer in the keystore")
    }
}
