import Foundation
import Testing
@testable import VaultCore
@testable import VaultHolders
import VaultTestSupport

/// A holder's emergency waits in its keystore, and the names a dealer gives them: the
/// findings H1 and H2 of this round's security review (Docs/SECURITY.md).
@Suite struct EmergencyWaitTests {
    let temporary = TemporaryDirectory("vault-emergency-wait")
    let dealer = Identity.generate(label: try! Label("alice")).0
    let trustee = Identity.generate(label: try! Label("dave")).0

    /// Bob's keystore, holding dave's emergency request for alice's secret: its wait ended
    /// `ago` seconds ago. Returns the keystore, the request's reply key and the secret's id.
    func holderWithEndedWait(ago: Int64 = 10, named name: String = "bob") throws -> (Keystore, [UInt8], [UInt8]) {
        let bob = try Keystore.create(home: VaultHome(directory: temporary.file(name)), label: Label(name), passphrase: nil)
        let holder = try bob.unlock(passphrase: nil)
        let dave = try bob.addPeer(trustee.card, label: trustee.label, address: nil)
        try bob.addPeer(dealer.card, label: dealer.label, address: nil)
        let secretID = SecureRandom().bytes(16), replyKey = ReplyKey().publicKey
        let now = Int64(Date().timeIntervalSince1970)
        let request = try RelayPieceRequest.make(secretID: secretID, dealer: dealer.card, holder: holder.card, own: nil, identity: trustee,
                                                 replyKey: replyKey, lifetime: 3600, now: UInt64(now - 100))
        guard case .added = try bob.addHolderRequest(nonce: request.nonce, kind: .piece, groupID: Array(repeating: 7, count: 16), peer: dave,
                                                     secretRow: BundleHeader.rowID(dealer: dealer.card, secretID: secretID),
                                                     record: request.encoded(), expires: UInt64(now + 86_400),
                                                     releaseAt: UInt64(now - ago), emergency: .waiting) else {
            throw VaultError.unexpected("the request was not queued")
        }
        return (bob, replyKey, secretID)
    }

    func denial(_ secretID: [UInt8], _ replyKey: [UInt8]) -> EmergencyDecision {
        EmergencyDecision.make(secretID: secretID, dealer: dealer, trustee: trustee.card, replyKey: replyKey, approves: false)
    }

    /// H1: listing the requests (`vault requests`, a rule taken) after the wait ended used to
    /// release the wait, and the dealer's denial read next cancelled nothing. A read now
    /// changes nothing, and the denial cancels the wait.
    @Test func aReadAfterTheWaitEndedLeavesItForTheDenial() throws {
        let (bob, replyKey, secretID) = try holderWithEndedWait()
        #expect(try bob.holderRequests([.waiting]).count == 1)
        #expect(try bob.holderRequests([.approved, .automatic, .denied, .expired]).isEmpty, "a read released the wait")
        _ = try bob.emergencyWait(matching: "0000")
        let decided = try bob.applyEmergencyDecision(denial(secretID, replyKey), keepUntil: UInt64(Date().timeIntervalSince1970) + 3600)
        #expect(decided.count == 1, "the denial found no wait to cancel")
        #expect(decided.first?.state == .denied && decided.first?.emergency == .cancelled)
        #expect(try bob.holderRequests([.automatic]).isEmpty)
    }

    /// A wait released at its end but whose piece has not gone out yet is still cancelled
    /// by the dealer's denial: until the piece leaves, the owner's word wins.
    @Test func aDenialCancelsAWaitReleasedButNotAnswered() throws {
        let (bob, replyKey, secretID) = try holderWithEndedWait()
        #expect(try bob.releaseEndedWaits(endedBy: Date()) { _ in true } == 1)
        #expect(try bob.holderRequests([.automatic]).count == 1)
        let decided = try bob.applyEmergencyDecision(denial(secretID, replyKey), keepUntil: UInt64(Date().timeIntervalSince1970) + 3600)
        #expect(decided.map(\.state) == [.denied])
        #expect(try bob.holderRequests([.automatic]).isEmpty)
        // Once answered, a denial changes nothing: the piece is gone.
        let (carol, carolsKey, carolsSecret) = try holderWithEndedWait(named: "carol")
        try carol.releaseEndedWaits(endedBy: Date()) { _ in true }
        let released = try #require(try carol.holderRequests([.automatic]).first)
        #expect(try carol.claimAnswer(released))
        #expect(try carol.applyEmergencyDecision(denial(carolsSecret, carolsKey), keepUntil: UInt64(Date().timeIntervalSince1970) + 3600).isEmpty)
    }

    /// A wait is released only by a reading of the relays that began after it ended and
    /// heard its dealer through: not before its end, and not when the dealer's relays were
    /// not read.
    @Test func aWaitIsReleasedOnlyAfterARoundThatHeardTheDealer() throws {
        let (bob, _, _) = try holderWithEndedWait(ago: 10)
        let now = Date()
        #expect(try bob.releaseEndedWaits(endedBy: now.addingTimeInterval(-20)) { _ in true } == 0, "released before its end")
        var asked: [KeyCard] = []
        #expect(try bob.releaseEndedWaits(endedBy: now) { asked.append($0); return false } == 0, "released unheard")
        #expect(asked == [dealer.card], "the dealer asked about is not the secret's")
        #expect(try bob.releaseEndedWaits(endedBy: now) { _ in true } == 1)
        #expect(try bob.releaseEndedWaits(endedBy: now) { _ in true } == 0, "released twice")
    }

    /// H2: the dealer's name for an emergency request was a plain hash of the reply key,
    /// which the trustee chooses, so two requests could be made to share it. It is now keyed
    /// by the dealer's secret: the same on every machine of the dealer, another for any
    /// other identity, and unrelated to the plain hash.
    @Test func aWatchIsNamedByTheDealerAlone() throws {
        let replyKey = ReplyKey().publicKey
        let copy = try Identity(label: Label("alice"), secret: try Self.secret(of: dealer))
        let name = EmergencyWatch.id(replyKey: replyKey, dealer: dealer)
        #expect(name.count == 8)
        #expect(EmergencyWatch.id(replyKey: replyKey, dealer: copy) == name)
        #expect(EmergencyWatch.id(replyKey: replyKey, dealer: trustee) != name)
        #expect(Sodium.blake2b(outputLength: 4, key: "vault/v1/emergency-id", replyKey).hex != name)
        // Names of many reply keys are spread as a keyed hash's are: no two of 2,000 alike.
        let names = Set((0..<2000).map { _ in EmergencyWatch.id(replyKey: ReplyKey().publicKey, dealer: dealer) })
        #expect(names.count == 2000)
    }

    /// A second request of the trustee's for the same share replaces the first, and the
    /// first's dealer is told so (it no longer looks as if it ran).
    @Test func aReplacedWaitIsToldAsReplaced() throws {
        let (bob, _, secretID) = try holderWithEndedWait(ago: -3600)
        let first = try #require(try bob.holderRequests([.waiting]).first)
        let dave = try bob.peer(named: "dave")
        let holder = try bob.unlock(passphrase: nil)
        let now = UInt64(Date().timeIntervalSince1970)
        let again = try RelayPieceRequest.make(secretID: secretID, dealer: dealer.card, holder: holder.card, own: nil, identity: trustee,
                                               replyKey: ReplyKey().publicKey, lifetime: 3600, now: now)
        _ = try bob.addHolderRequest(nonce: again.nonce, kind: .piece, groupID: Array(repeating: 7, count: 16), peer: dave,
                                     secretRow: BundleHeader.rowID(dealer: dealer.card, secretID: secretID), record: again.encoded(),
                                     expires: now + 86_400, releaseAt: now + 3600, emergency: .waiting)
        let notices = try bob.emergencyNoticesDue()
        #expect(notices.first { $0.id == first.id }?.notice == .replaced, "the replaced request is not told as replaced")
        #expect(notices.contains { $0.id != first.id && $0.notice == .waiting })
    }

    static func secret(of identity: Identity) throws -> SecureBytes {
        let secret = SecureBytes(count: 64)
        secret.withUnsafeMutableBytes { out in
            identity.agreementSecret.withUnsafeBytes { out.copyMemory(from: $0) }
            identity.signingSecret.withUnsafeBytes { seed in
                (out.baseAddress! + 32).copyMemory(from: seed.baseAddress!, byteCount: 32)
            }
        }
        return secret
    }
}
