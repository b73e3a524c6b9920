import Foundation
import Testing
@testable import VaultCore
@testable import VaultHolders
import VaultTestSupport

/// Issue 47: after a recovery finished, a holder's later answer reached its requester as
/// "refused an answer to no request under way here", which reads like an attack. An answer
/// to a request of a recovery that ended is said to be late; one to no request at all is
/// still refused.
@Suite struct LateAnswerTests {
    let temporary = TemporaryDirectory("vault-late-answer")

    @Test func anAnswerAfterTheRecoveryEndedIsLate() throws {
        let keystore = try Keystore.create(home: VaultHome(directory: temporary.file("alice")), label: Label("alice"), passphrase: nil)
        let identity = try keystore.unlock(passphrase: nil)
        let carol = Identity.generate(label: try Label("carol")).0
        let peer = try keystore.addPeer(carol.card, label: carol.label, address: nil)
        let recovery = try keystore.startRecovery(dealer: identity.card, secretID: SecureRandom().bytes(16), holdsShare: true, identity: identity,
                                                  lifetime: 3600)
        let nonce = SecureRandom().bytes(16)
        try keystore.recordAsk(recovery, nonce: nonce, holder: peer, groupID: Array(repeating: 3, count: 16))
        try keystore.endRecovery(recovery)
        guard case .late(let label) = try RecoveryDesk.take(answer: nonce, outcome: .denied, prefix: nil, piece: nil, from: carol.card,
                                                            keystore: keystore, identity: identity) else {
            Issue.record("a late answer was not said to be late")
            return
        }
        #expect(label == "carol")
        guard case .refused = try RecoveryDesk.take(answer: SecureRandom().bytes(16), outcome: .denied, prefix: nil, piece: nil, from: carol.card,
                                                    keystore: keystore, identity: identity) else {
            Issue.record("an answer to no request at all was taken")
            return
        }
    }

    /// A withdrawal answers a waiting request with nothing, from its requester only.
    @Test func aWithdrawalEndsOnlyItsRequestersWaitingRequest() throws {
        let keystore = try Keystore.create(home: VaultHome(directory: temporary.file("carol")), label: Label("carol"), passphrase: nil)
        let alice = try keystore.addPeer(Identity.generate(label: try Label("alice")).0.card, label: Label("alice"), address: nil)
        let mallory = Identity.generate(label: try Label("mallory")).0
        let nonce = SecureRandom().bytes(16)
        guard case .added(let request) = try keystore.addHolderRequest(nonce: nonce, kind: .piece, groupID: Array(repeating: 3, count: 16),
                                                                       peer: alice, secretRow: SecureRandom().bytes(16),
                                                                       record: Array("request".utf8),
                                                                       expires: UInt64(Date().timeIntervalSince1970) + 3600) else {
            Issue.record("not queued")
            return
        }
        #expect(try keystore.withdrawHolderRequest(nonce: nonce, from: mallory.card.agreementKey) == nil)
        #expect(try keystore.holderRequests([.waiting]).map(\.id) == [request.id])
        #expect(try keystore.withdrawHolderRequest(nonce: nonce, from: alice.card.agreementKey)?.id == request.id)
        #expect(try keystore.holderRequests([.waiting]).isEmpty)
        #expect(try keystore.withdrawHolderRequest(nonce: nonce, from: alice.card.agreementKey) == nil)
    }
}
