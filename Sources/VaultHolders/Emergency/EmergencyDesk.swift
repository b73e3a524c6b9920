import VaultCore
import Foundation

/// Emergency access (Docs/PROTOCOL.md §10): what a holder makes of a dealer's rule and
/// decisions, and what a dealer makes of its holders' answers and notices. The network is
/// the caller's; nothing here sends. A trustee's request is taken by ``HolderDesk``, which
/// asks ``waitFor(_:peer:rule:group:keystore:now:)`` when an accepted rule names it.
public enum EmergencyDesk {
    /// What became of a rule.
    public enum RuleIntake: Sendable {
        /// Its role waits for the holder's person (answer "waiting for consent").
        case queued(HolderRequest)
        /// Taken at once, no one asked: the rule turned off, or the role already taken with
        /// the same trustee and a wait no shorter. Answer so.
        case taken(HolderRecord.RoleState)
        /// This rule is held already (sent again, or through another group): answer how its
        /// role stands.
        case known(HolderRecord.RoleState?)
        /// A check refused it (the words say which); the dealer is told nothing, as it may not
        /// be the dealer who sent it.
        case refused(String)
    }

    /// Takes a rule that came from `sender` through the group `groupID` (empty: over the
    /// LAN). Only the dealer it names may deliver it, signed by that dealer, for a share
    /// held here (or offered and waiting), and newer than the rule held.
    public static func take(rule: EmergencyRule, from sender: KeyCard, groupID: [UInt8], keystore: Keystore,
                            now: Date = VaultClock.now()) throws(VaultError) -> RuleIntake {
        // Signed by the dealer it names (checked at parsing); delivered by that dealer too,
        // as its share is: a holder takes a rule from no one else.
        guard sender == rule.dealer else { return .refused("it was sent by someone other than the dealer it names") }
        guard let dealer = try keystore.peers().first(where: { $0.card == sender }) else { return .refused("its dealer is not trusted") }
        let row = rule.secretRow
        let held = try keystore.secrets().contains { $0.header.rowID == row }
        let offered = try keystore.holderRequests([.waiting, .approved]).contains { $0.kind == .share && $0.secretRow == row }
        guard held || offered else { return .refused("this holder holds no share of that secret from that dealer") }
        let current = try keystore.emergencyRule(secretRow: row)
        if let current, rule.issued <= current.rule.issued {
            guard current.rule == rule else { return .refused("it is older than the rule held (a replay, or sent out of order)") }
            return .known(roleState(current.role))
        }
        let oldTrustee = current.flatMap { $0.role == .accepted ? $0.rule : nil }
        if rule.isOff {
            try keystore.setEmergencyRule(rule, role: .off, now: now)
            try keystore.followRule(secretRow: row, trustee: nil, wait: 0)
            if let old = oldTrustee {
                try keystore.recordRelease(secretID: rule.secretID, peerKey: old.trustee.agreementKey, peerLabel: try label(of: old.trustee, keystore: keystore),
                                           requester: 0, decision: .ruleOff)
            }
            return .taken(.off)
        }
        // The same trustee with a wait no shorter asks nothing new of this holder.
        if let old = oldTrustee, old.trustee == rule.trustee, rule.wait >= old.wait {
            try keystore.setEmergencyRule(rule, role: .accepted, now: now)
            try keystore.followRule(secretRow: row, trustee: rule.trustee, wait: rule.wait)
            return .taken(.accepted)
        }
        // Until the person takes the new role, no rule lets anyone through.
        try keystore.setEmergencyRule(rule, role: .offered, now: now)
        try keystore.followRule(secretRow: row, trustee: nil, wait: 0)
        let nonce = Sodium.blake2b(outputLength: 16, key: "vault/v1/emergency-rule-id", rule.encoded)
        switch try keystore.addHolderRequest(nonce: nonce, kind: .role, groupID: groupID, peer: dealer, secretRow: row, record: rule.encoded,
                                             expires: UInt64(now.timeIntervalSince1970) + RelayPieceRequest.maximumLifetime, now: now) {
        case .added(let taken): return .queued(taken)
        case .replayed: return .known(nil)
        case .busy: return .refused("too many requests and offers from its dealer wait here")
        }
    }

    /// The answer a role's state gives the dealer.
    static func roleState(_ role: StoredEmergencyRule.Role) -> HolderRecord.RoleState? {
        switch role {
        case .accepted: .accepted
        case .declined: .declined
        case .offered: .waiting
        case .off: .off
        case .dealt: nil
        }
    }

    /// A trustee's piece request for a share whose accepted rule names it: it waits the
    /// rule's wait from now, by this holder's clock (a relay that held it back only made
    /// it start later; one that replays it meets its nonce), unless a decision of the
    /// dealer's about this recovery came first. Recorded, with the wait's start in the
    /// release log.
    static func waitFor(_ request: RelayPieceRequest, peer: Peer, rule: EmergencyRule, group: GroupRecord, keystore: Keystore,
                        now: Date) throws(VaultError) -> HolderIntake {
        // Whole seconds, rounded up: never a moment before the full wait from receipt.
        let releaseAt = UInt64(now.timeIntervalSince1970.rounded(.up)) + rule.wait
        var state = HolderRequest.State.waiting, emergency = HolderRequest.Emergency.waiting
        if let decision = try keystore.emergencyDecision(replyKey: request.replyKey), decision.trustee == request.requesterCard,
           decision.secretRow == rule.secretRow {
            (state, emergency) = decision.approves ? (.automatic, .approved) : (.denied, .cancelled)
        }
        // Kept until it released, and a day more to answer: past its own expiry if the wait
        // is longer (the requester learns the release time and waits as long).
        let intake = try keystore.addHolderRequest(nonce: request.nonce, kind: .piece, groupID: group.id, peer: peer, secretRow: rule.secretRow,
                                                   record: request.encoded(), state: state, expires: max(request.expires, releaseAt + 86_400),
                                                   releaseAt: releaseAt, emergency: emergency, now: now)
        if case .added = intake {
            try keystore.recordRelease(secretID: rule.secretID, peer: peer, requester: request.requester, decision: .emergencyWait,
                                       detail: "releases at \(Self.time(releaseAt)) unless the dealer denies")
        }
        return intake
    }

    /// What became of a dealer's decision.
    public enum DecisionIntake: Sendable {
        /// These requests were decided by it (answer them); others that ended before are
        /// told to the dealer again.
        case applied([HolderRequest])
        case refused(String)
    }

    /// Takes a dealer's decision that came from `sender`.
    public static func take(decision: EmergencyDecision, from sender: KeyCard, keystore: Keystore, now: Date = VaultClock.now()) throws(VaultError) -> DecisionIntake {
        guard sender == decision.dealer else { return .refused("it was sent by someone other than the dealer it names") }
        guard try keystore.secrets().contains(where: { $0.header.rowID == decision.secretRow }) else {
            return .refused("this holder holds no share of that secret from that dealer")
        }
        // Kept as long as a request of that recovery could still come, and wait.
        let keepUntil = UInt64(now.timeIntervalSince1970) + RelayPieceRequest.maximumLifetime + EmergencyRule.longestWait
        return .applied(try keystore.applyEmergencyDecision(decision, keepUntil: keepUntil, now: now))
    }

    /// What a dealer learned.
    public struct News: Sendable {
        public let watch: EmergencyWatch
        /// The holder that told, and what.
        public let holder: String
        public let state: HolderRecord.NoticeState
        /// Whether this is the first the dealer hears of the request.
        public let new: Bool
        /// The request as `vault requests` lists it (nil once the secret is gone).
        public let described: ReleaseApprovals.Request?
    }

    /// Takes a holder's notice of an emergency request for one of this dealer's secrets.
    /// Nil when it changes nothing (told before); a check that fails throws.
    public static func take(notice: HolderRecord.Notice, from sender: KeyCard, keystore: Keystore, identity: Identity,
                            now: Date = VaultClock.now()) throws -> News? {
        func fail(_ detail: String) -> VaultError { .malformed(what: "the emergency notice", detail: detail) }
        let request = notice.request
        guard request.dealer == identity.card else { throw fail("it is about another dealer's secret") }
        guard request.holder == sender else { throw fail("it tells of a request made to another holder") }
        let row = BundleHeader.rowID(dealer: identity.card, secretID: request.secretID)
        guard let secret = try keystore.secrets().first(where: { $0.header.rowID == row && $0.role == .dealer }) else {
            throw fail("it is about a secret this identity did not deal")
        }
        guard secret.header.index(of: sender.agreementKey) != nil else { throw fail("its sender holds no share of the secret") }
        let isNew = try keystore.emergencyWatches(secretRow: row).allSatisfy { $0.replyKey != request.replyKey }
        let (watch, changed) = try keystore.noteEmergency(notice, holder: sender, holderLabel: try label(of: sender, keystore: keystore),
                                                          trusteeLabel: try label(of: request.requesterCard, keystore: keystore),
                                                          secretRow: row, dealer: identity, now: now)
        guard changed else { return nil }
        return News(watch: watch, holder: try label(of: sender, keystore: keystore), state: notice.state, new: isNew,
                    described: ConsentQueue.describe(watch, keystore: keystore, open: true))
    }

    /// Takes a holder's answer to this dealer's rule of `secretID`; nil when it answers
    /// a rule that is no longer the one set (or answered already).
    public static func take(roleAnswer secretID: [UInt8], issued: UInt64, state: HolderRecord.RoleState, from sender: KeyCard,
                            keystore: Keystore, identity: Identity) throws(VaultError) -> (label: String, state: EmergencyRole.State)? {
        let row = BundleHeader.rowID(dealer: identity.card, secretID: secretID)
        // By the whole card, as a share answer is (RecoveryDesk.take(shareAnswer:)).
        guard try keystore.peers().contains(where: { $0.card == sender }) else { return nil }
        let role: EmergencyRole.State = switch state {
        case .accepted: .accepted
        case .declined: .declined
        case .waiting: .waitingForConsent
        case .off: .off
        }
        guard try keystore.answerRole(secretRow: row, holderKey: sender.agreementKey, issued: issued, state: role) else { return nil }
        return (try label(of: sender, keystore: keystore), role)
    }

    /// The signed decision of a watch decided here, made once (with `identity`, the
    /// dealer's) and kept, so that every holder gets the same bytes.
    public static func decisionRecord(_ watch: EmergencyWatch, keystore: Keystore, identity: Identity) throws(VaultError) -> EmergencyDecision? {
        guard let decided = watch.decision else { return nil }
        if let record = watch.record { return try EmergencyDecision(parsing: record) }
        guard let secret = try keystore.secrets().first(where: { $0.header.rowID == watch.secretRow }) else { return nil }
        let decision = EmergencyDecision.make(secretID: secret.header.secretID, dealer: identity, trustee: watch.trustee,
                                              replyKey: watch.replyKey, approves: decided == .approved)
        try keystore.setDecisionRecord(replyKey: watch.replyKey, record: decision.encoded)
        return decision
    }

    /// The holders a watch's decision goes to: every trusted holder of the secret but the
    /// dealer (told of the request or not), recorded with the watch.
    public static func recipients(_ watch: EmergencyWatch, keystore: Keystore, identity: Identity) throws(VaultError) -> [Peer] {
        guard let secret = try keystore.secrets().first(where: { $0.header.rowID == watch.secretRow }) else { return [] }
        let holders = try keystore.peers().filter { peer in
            guard let index = secret.header.index(of: peer.card.agreementKey) else { return false }
            return index != secret.header.holderIndex
        }
        try keystore.addUntoldHolders(replyKey: watch.replyKey, holders.map { ($0.card.agreementKey, $0.label.value) })
        return holders
    }

    /// A card by this keystore's label for it, or its fingerprint.
    static func label(of card: KeyCard, keystore: Keystore) throws(VaultError) -> String {
        try keystore.peers().first { $0.card == card }?.label.value ?? card.fingerprint
    }

    /// A Unix time as the release log words it (UTC, ISO 8601).
    static func time(_ seconds: UInt64) -> String {
        ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }
}
