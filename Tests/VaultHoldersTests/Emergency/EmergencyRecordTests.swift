import Foundation
import Testing
@testable import VaultCore
@testable import VaultHolders
import VaultTestSupport

/// FORMAT §21: the emergency rule and the dealer's decision, read strictly, and the holder
/// records that carry them (§20 kinds 5 to 8).
@Suite struct EmergencyRecordTests {
    let dealer = Identity.generate(label: try! Label("alice")).0
    let trustee = Identity.generate(label: try! Label("dave")).0
    let holder = Identity.generate(label: try! Label("bob")).0
    let secretID = [UInt8](repeating: 7, count: 16)

    func head(_ bytes: [UInt8]) throws -> HolderRecord.Head {
        var source = BytesSource(bytes)
        return try HolderRecord.readHead(&source)
    }

    @Test func aRuleRoundTripsAndIsTheDealersAlone() throws {
        let rule = try EmergencyRule.make(secretID: secretID, dealer: dealer, trustee: trustee.card, wait: 7 * 86_400, issued: 1_800_000_000)
        let bytes = rule.encoded
        #expect(bytes.count == 227)
        #expect(try EmergencyRule(parsing: bytes) == rule)
        for offset in [0, 1, 20, 100, 200, 226] {
            var altered = bytes
            altered[offset] ^= 1
            #expect(throws: VaultError.self) { try EmergencyRule(parsing: altered) }
        }
        #expect(throws: VaultError.self) { try EmergencyRule(parsing: bytes + [0]) }
        #expect(throws: VaultError.self) { try EmergencyRule(parsing: Array(bytes.dropLast())) }
        // Signed by anyone but the dealer it names: refused, whatever it says.
        let forged = EmergencyRule.signed(secretID: secretID, dealer: dealer.card, trustee: trustee.card, wait: 60, issued: 1, by: trustee)
        #expect(throws: VaultError.badSignature(what: "the emergency rule (it is not signed by the dealer it names)")) {
            try EmergencyRule(parsing: forged.encoded)
        }
    }

    @Test func aRuleKeepsItsBounds() throws {
        #expect(throws: VaultError.self) { try EmergencyRule.make(secretID: secretID, dealer: dealer, trustee: trustee.card, wait: 0, issued: 1) }
        #expect(throws: VaultError.self) {
            try EmergencyRule.make(secretID: secretID, dealer: dealer, trustee: trustee.card, wait: EmergencyRule.longestWait + 1, issued: 1)
        }
        #expect(throws: VaultError.self) { try EmergencyRule.make(secretID: secretID, dealer: dealer, trustee: dealer.card, wait: 60, issued: 1) }
        // Off: a wait of 0 and the dealer's own card; anything else with a wait of 0 is refused.
        let off = try EmergencyRule.make(secretID: secretID, dealer: dealer, trustee: nil, wait: 60, issued: 2)
        #expect(off.isOff && off.trustee == dealer.card && off.wait == 0)
        #expect(try EmergencyRule(parsing: off.encoded) == off)
        for (card, wait) in [(trustee.card, UInt64(0)), (dealer.card, UInt64(60)), (trustee.card, EmergencyRule.longestWait + 1)] {
            let bad = EmergencyRule.signed(secretID: secretID, dealer: dealer.card, trustee: card, wait: wait, issued: 3, by: dealer)
            #expect(throws: VaultError.self) { try EmergencyRule(parsing: bad.encoded) }
        }
        let future = EmergencyRule.signed(secretID: secretID, dealer: dealer.card, trustee: trustee.card, wait: 60, issued: UInt64(Int64.max) + 1,
                                          by: dealer)
        #expect(throws: VaultError.self) { try EmergencyRule(parsing: future.encoded) }
    }

    @Test func aDecisionRoundTripsAndIsTheDealersAlone() throws {
        let replyKey = ReplyKey().publicKey
        for approves in [false, true] {
            let decision = EmergencyDecision.make(secretID: secretID, dealer: dealer, trustee: trustee.card, replyKey: replyKey, approves: approves)
            #expect(decision.encoded.count == 252)
            #expect(try EmergencyDecision(parsing: decision.encoded) == decision)
            var altered = decision.encoded
            altered[148 + 32] ^= 3
            #expect(throws: VaultError.self) { try EmergencyDecision(parsing: altered) }
        }
        let forged = EmergencyDecision.signed(secretID: secretID, dealer: dealer.card, trustee: trustee.card, replyKey: replyKey, approves: true,
                                              issued: 1, by: trustee)
        #expect(throws: VaultError.self) { try EmergencyDecision(parsing: forged.encoded) }
    }

    @Test func holderRecordsCarryThemPadded() throws {
        let rule = try EmergencyRule.make(secretID: secretID, dealer: dealer, trustee: trustee.card, wait: 60, issued: 5)
        let decision = EmergencyDecision.make(secretID: secretID, dealer: dealer, trustee: trustee.card, replyKey: ReplyKey().publicKey,
                                              approves: false)
        let request = try RelayPieceRequest.make(secretID: secretID, dealer: dealer.card, holder: holder.card, own: nil, identity: trustee,
                                                 replyKey: ReplyKey().publicKey, lifetime: 3600, now: 1_800_000_000)
        let notice = HolderRecord.Notice(state: .waiting, received: 1_800_000_010, releaseAt: 1_800_000_070, request: request)
        let records = [HolderRecord.emergencyRule(rule), HolderRecord.emergencyDecision(decision),
                       HolderRecord.roleAnswer(secretID: secretID, issued: 5, state: .declined), HolderRecord.emergencyNotice(notice),
                       HolderRecord.pieceAnswer(nonce: secretID, outcome: .emergencyWait(until: 42)),
                       HolderRecord.pieceAnswer(nonce: secretID, outcome: .deniedByDealer)]
        for record in records {
            #expect(record.count == 512)
            #expect(throws: VaultError.self) { try head(Array(record.dropLast())) }
            var dirty = record
            dirty[511] = 1
            #expect(throws: VaultError.self) { try head(dirty) }
        }
        guard case .emergencyRule(let read) = try head(records[0]), case .emergencyDecision(let readDecision) = try head(records[1]),
              case .roleAnswer(let id, 5, .declined) = try head(records[2]), case .emergencyNotice(let readNotice) = try head(records[3]),
              case .pieceAnswer(_, .emergencyWait(42), nil) = try head(records[4]), case .pieceAnswer(_, .deniedByDealer, nil) = try head(records[5])
        else { Issue.record("a record did not read back as itself"); return }
        #expect(read == rule && readDecision == decision && id == secretID)
        #expect(readNotice.request == request && readNotice.state == .waiting && readNotice.releaseAt == 1_800_000_070)
        // A notice that releases before it was received, or of an unknown state, is refused.
        var early = records[3]
        early[2 + 1 + 8 + 7] = 0
        early[2 + 1 + 8 + 6] = 0
        #expect(throws: VaultError.self) { try head(early) }
        var unknown = records[3]
        unknown[2] = 9
        #expect(throws: VaultError.self) { try head(unknown) }
    }

    /// A holder's keystore takes a dealer's rules: only from the dealer, only newer than the
    /// one held (an old one replayed is refused), the same trustee with a wait no shorter
    /// without asking, anything else asked again; and a denial kept before its request wins.
    @Test func aHolderTakesOnlyTheDealersLatestRule() throws {
        let temporary = TemporaryDirectory("vault-emergency")
        let alice = try Keystore.create(home: VaultHome(directory: temporary.file("alice")), label: Label("alice"), passphrase: nil)
        let bob = try Keystore.create(home: VaultHome(directory: temporary.file("bob")), label: Label("bob"), passphrase: nil)
        let dealer = try alice.unlock(passphrase: nil), holder = try bob.unlock(passphrase: nil)
        try alice.addPeer(holder.card, label: holder.label, address: nil)
        try bob.addPeer(dealer.card, label: dealer.label, address: nil)
        try bob.addPeer(trustee.card, label: trustee.label, address: nil)
        let request = ShareRequest(type: .note, threshold: 2, holders: [(label: holder.label, card: holder.card)])
        let outputs = try (0..<2).map { try OutputFile(path: temporary.file("b\($0).vshare")) }
        let header = try SecretDealer.share(request, content: BytesSource(Array("passport".utf8)), dealer: dealer, outputs: outputs)[1]
        try outputs[1].commit()
        try bob.importBundles([outputs[1].path], identity: holder)

        func rule(_ wait: UInt64, _ issued: UInt64) throws -> EmergencyRule {
            try EmergencyRule.make(secretID: header.secretID, dealer: dealer, trustee: trustee.card, wait: wait, issued: issued)
        }
        func take(_ rule: EmergencyRule, from sender: KeyCard? = nil) throws -> EmergencyDesk.RuleIntake {
            try EmergencyDesk.take(rule: rule, from: sender ?? dealer.card, groupID: [], keystore: bob)
        }
        let first = try rule(600, 100)
        guard case .refused = try take(first, from: trustee.card) else { Issue.record("taken from another sender"); return }
        guard case .queued(let offer) = try take(first) else { Issue.record("not offered"); return }
        #expect(try bob.decideHolderRequest(offer.id, approve: true) != nil)
        #expect(try bob.decideRole(first, accept: true))
        #expect(try bob.emergencyRule(secretRow: header.rowID)?.role == .accepted)
        guard case .known(.accepted?) = try take(first) else { Issue.record("the same rule again is not known"); return }
        guard case .refused(let reason) = try take(try rule(6000, 99)) else { Issue.record("an older rule was taken"); return }
        #expect(reason.contains("older than the rule held"))
        guard case .taken(.accepted) = try take(try rule(700, 101)) else { Issue.record("a longer wait was asked again"); return }
        guard case .queued = try take(try rule(60, 102)) else { Issue.record("a shorter wait was not asked again"); return }
        #expect(try bob.emergencyRule(secretRow: header.rowID)?.role == .offered)
        let off = try EmergencyRule.make(secretID: header.secretID, dealer: dealer, trustee: nil, wait: 0, issued: 103)
        guard case .taken(.off) = try take(off) else { Issue.record("off not taken"); return }
        #expect(try bob.emergencyRule(secretRow: header.rowID)?.role == .off)

        // A denial that came first wins over an approval after it, for that recovery only.
        let replyKey = ReplyKey().publicKey
        let denial = EmergencyDecision.make(secretID: header.secretID, dealer: dealer, trustee: trustee.card, replyKey: replyKey, approves: false)
        let approval = EmergencyDecision.make(secretID: header.secretID, dealer: dealer, trustee: trustee.card, replyKey: replyKey, approves: true)
        guard case .refused = try EmergencyDesk.take(decision: denial, from: trustee.card, keystore: bob) else { Issue.record("a decision from another"); return }
        _ = try EmergencyDesk.take(decision: denial, from: dealer.card, keystore: bob)
        _ = try EmergencyDesk.take(decision: approval, from: dealer.card, keystore: bob)
        #expect(try bob.emergencyDecision(replyKey: replyKey)?.approves == false)
        #expect(try bob.emergencyDecision(replyKey: ReplyKey().publicKey) == nil)
    }
}
