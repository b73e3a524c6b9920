import Foundation
import VaultCore
import VaultHolders

/// Emergency access through a group's relays (Docs/PROTOCOL.md §10): a dealer's rule to its
/// holders and their answers, a holder's notices to the dealer of a trustee's request, and
/// the dealer's decisions. Each is a holder message (FORMAT.md §20), as the other steps
/// between holders are; ``EmergencyDesk`` checks what they carry.
public enum EmergencyMail {
    /// Offers `rule` to `holder` through `group`; returns which relays stored it.
    public static func offer(_ rule: EmergencyRule, to holder: Peer, in group: GroupRecord, keystore: Keystore,
                             identity: Identity) async throws -> Messenger.Stored {
        try await HolderMail.send(to: holder.card, in: group, lifetime: HolderMail.offerLifetime, keystore: keystore, identity: identity) { emit in
            try HolderRecord.emergencyRule(rule).withUnsafeBytes(emit)
        }
    }

    /// Takes a rule that came from `sender` through `group`, and answers it.
    static func received(_ rule: EmergencyRule, from sender: GroupRecord.Member, in group: GroupRecord, keystore: Keystore, identity: Identity,
                         report: inout HolderReport) async throws {
        let who = sender.label.value
        func answer(_ state: HolderRecord.RoleState) async throws {
            _ = try await HolderMail.send(to: sender.card, in: group, lifetime: HolderMail.offerLifetime, keystore: keystore, identity: identity) { emit in
                try HolderRecord.roleAnswer(secretID: rule.secretID, issued: rule.issued, state: state).withUnsafeBytes(emit)
            }
        }
        switch try EmergencyDesk.take(rule: rule, from: sender.card, groupID: group.id, keystore: keystore) {
        case .queued(let request):
            if let described = ConsentQueue.describe(request, keystore: keystore) { report.events.append(.queued(described)) }
            await HolderMail.answer(request, keystore: keystore, identity: identity, report: &report)
        case .taken(let state):
            report.events.append(.ruleTaken(from: who, secret: rule.secretID.hex, state: state))
            try await answer(state)
        case .known(let state):
            if let state { try await answer(state) }
        case .refused(let reason):
            report.events.append(.refusedRule(from: who, reason: reason))
        }
    }

    /// Takes a dealer's decision that came from `sender`: the requests it decides are
    /// answered now, and the dealer told.
    static func received(_ decision: EmergencyDecision, from sender: GroupRecord.Member, keystore: Keystore, identity: Identity,
                         report: inout HolderReport) async throws {
        switch try EmergencyDesk.take(decision: decision, from: sender.card, keystore: keystore) {
        case .applied(let decided):
            let trustee = try keystore.peers().first { $0.card == decision.trustee }?.label.value ?? decision.trustee.fingerprint
            report.events.append(.dealerDecision(from: sender.label.value, trustee: trustee, approves: decision.approves, decided: decided.count))
            for request in decided { await HolderMail.answer(request, keystore: keystore, identity: identity, report: &report) }
            await tellDealers(keystore: keystore, identity: identity, report: &report)
        case .refused(let reason):
            report.problems.append("an emergency decision from '\(sender.label)' was refused: \(reason)")
        }
    }

    /// Tells each dealer where the emergency requests held here stand, where that changed
    /// since it was last told: a wait that started, was cancelled or denied, or released.
    /// Left on the relays until it expires, so that every machine of the dealer sees it.
    public static func tellDealers(keystore: Keystore, identity: Identity, report: inout HolderReport) async {
        do {
            try keystore.forgetOldEmergencyDecisions()
            for request in try keystore.emergencyNoticesDue() {
                guard let state = request.notice, let asked = request.pieceRequest, let releaseAt = request.releaseAt,
                      let dealer = try keystore.peers().first(where: { $0.card == asked.dealer }),
                      let group = try HolderMail.sharedGroup(with: dealer.card, keystore: keystore, identity: identity) else { continue }
                let notice = HolderRecord.Notice(state: state, received: UInt64(request.received.timeIntervalSince1970),
                                                 releaseAt: UInt64(releaseAt.timeIntervalSince1970), request: asked)
                let lifetime = UInt64(max(3600, releaseAt.timeIntervalSince(VaultClock.now()) + 86_400))
                do {
                    let stored = try await HolderMail.send(to: dealer.card, in: group, lifetime: min(lifetime, HolderMail.offerLifetime), kept: true,
                                                           keystore: keystore, identity: identity) { emit in
                        try HolderRecord.emergencyNotice(notice).withUnsafeBytes(emit)
                    }
                    try stored.require(HolderMail.minimumRelays(group), of: group)
                    try keystore.markTold(request, state)
                } catch {
                    report.problems.append("could not tell '\(dealer.label)' of \(request.peerLabel)'s emergency request \(request.id): "
                                           + "\(VaultError.words(for: error)); tried again later")
                }
            }
        } catch {
            report.problems.append("emergency requests: \(VaultError.words(for: error))")
        }
    }

    /// Sends each decision this dealer made, and has not yet stored on the relays for every
    /// holder of the secret, to each holder still missing it: told of the request or not.
    public static func sendDecisions(keystore: Keystore, identity: Identity, report: inout HolderReport) async {
        do {
            try keystore.forgetOldWatches()
            for watch in try keystore.emergencyWatches() where watch.decision != nil {
                guard let decision = try EmergencyDesk.decisionRecord(watch, keystore: keystore, identity: identity) else { continue }
                let sent = Set(watch.holders.filter(\.decisionSent).map(\.key))
                for holder in try EmergencyDesk.recipients(watch, keystore: keystore, identity: identity) where !sent.contains(holder.card.agreementKey) {
                    do {
                        guard let group = try HolderMail.sharedGroup(with: holder.card, keystore: keystore, identity: identity) else {
                            report.problems.append("no group of yours has '\(holder.label)' as a member, to send it your decision about "
                                                   + "\(watch.trusteeLabel)'s emergency request \(watch.id)")
                            continue
                        }
                        let stored = try await HolderMail.send(to: holder.card, in: group, lifetime: HolderMail.offerLifetime, keystore: keystore,
                                                               identity: identity) { emit in
                            try HolderRecord.emergencyDecision(decision).withUnsafeBytes(emit)
                        }
                        try stored.require(HolderMail.minimumRelays(group), of: group)
                        try keystore.markDecisionSent(replyKey: watch.replyKey, holderKey: holder.card.agreementKey)
                        report.events.append(.decisionSent(to: holder.label.value, trustee: watch.trusteeLabel, approves: decision.approves))
                    } catch {
                        report.problems.append("could not send '\(holder.label)' your decision about \(watch.trusteeLabel)'s emergency request "
                                               + "\(watch.id): \(VaultError.words(for: error)); tried again later")
                    }
                }
            }
        } catch {
            report.problems.append("emergency decisions: \(VaultError.words(for: error))")
        }
    }
}
