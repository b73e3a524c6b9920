import Foundation
import VaultCore
import VaultHolders
import VaultRelayProtocol

/// What holders of secrets said to each other through relays in one run.
public struct HolderReport: Sendable {
    /// One thing that happened, for the command to say.
    public enum Event: Sendable {
        /// A request or a share offer now waits for this holder's person.
        case queued(ReleaseApprovals.Request)
        /// A piece went out without asking (automatic release).
        case releasedAutomatically(to: String, secret: String)
        /// A request was refused on a check; its requester is told which.
        case refusedRequest(from: String, reason: String)
        /// A share offer was refused; its dealer is told.
        case refusedOffer(from: String, reason: String)
        /// An answer came back for a recovery or a share offer of this identity's.
        case answer(RecoveryDesk.Taken)
        /// The answer to a decided request went out.
        case answered(to: String, what: String)
        /// A trustee's emergency request started its wait here (nobody is asked: it is
        /// released when the wait ends, unless the dealer or this holder's person denies it).
        case emergencyWait(ReleaseApprovals.Request)
        /// A dealer's emergency rule was taken without asking (the role already taken with
        /// the same trustee, or the rule turned off), or refused on a check.
        case ruleTaken(from: String, secret: String, state: HolderRecord.RoleState)
        case refusedRule(from: String, reason: String)
        /// A dealer's decision arrived: it denied (or approved) `trustee`'s emergency access,
        /// deciding this many requests waiting here.
        case dealerDecision(from: String, trustee: String, approves: Bool, decided: Int)
        /// This dealer's decision was stored on the relays for a holder.
        case decisionSent(to: String, trustee: String, approves: Bool)
        /// A requester withdrew its piece request `request` (its recovery is over): its
        /// question here is gone.
        case withdrawn(from: String, request: String)
    }

    public var events: [Event] = []
    /// Problems, one line each.
    public var problems: [String] = []
    /// What the run read of the relays, when it read them (an emergency wait is released
    /// only after a round that heard its dealer through).
    public var round: RelayRound?
    /// Holder messages from a sender that the group's record held here does not name (yet):
    /// left on the relays, and taken once a newer record names it.
    public var waitingForRecord: [Unlisted] = []
    /// Groups accepted, or taken at a new version, by the run (a serve's refresh).
    public var groups: [String] = []

    /// A holder message whose sender the record of its group held here does not list.
    public struct Unlisted: Sendable, Hashable {
        public let group: String
        /// The message id, in hex.
        public let message: String
        /// The sender's card's fingerprint.
        public let sender: String
    }

    public init() {}

    /// Whether nothing happened.
    public var isEmpty: Bool { events.isEmpty && problems.isEmpty && waitingForRecord.isEmpty && groups.isEmpty }
}

/// The holder protocol through a group's relays (Docs/PROTOCOL.md §9): share offers to
/// holders who are not on the LAN, piece requests to them, and every answer. Each step is a
/// holder message (FORMAT.md §19, kind `holder`), sealed to its one recipient and stored
/// whole on every relay of a group both belong to, so that one relay down loses nothing;
/// what it carries (FORMAT.md §20) is checked by ``HolderDesk`` and ``RecoveryDesk``.
public enum HolderMail {
    /// How many relays must store a step for it to count as sent: two (every group has at
    /// least two), so that one relay down afterwards loses nothing.
    /// The guest box (Docs/RELAY.md, "The guest box") is read on whichever relays it can be:
    /// one is enough there, since a new machine may have pinned only one.
    public static func minimumRelays(_ group: GroupRecord) -> Int { group.isGuestBox ? 1 : min(2, group.relays.count) }

    /// This identity's guest box: the relays it pinned and those of its groups, each once,
    /// with its trusted peers as the members it takes guest messages from. Nil with no
    /// relay.
    public static func guestBox(keystore: Keystore, identity: Identity) -> GroupRecord? {
        var relays: [GroupRecord.Relay] = []
        for relay in (try? keystore.pinnedRelays()) ?? [] where !relays.contains(where: { $0.card == relay.card }) {
            relays.append(.init(name: relay.label, url: relay.url, card: relay.card))
        }
        for group in (try? keystore.groups()) ?? [] {
            for relay in group.relays where !relays.contains(where: { $0.card == relay.card }) { relays.append(relay) }
        }
        let peers = ((try? keystore.peers()) ?? []).map { GroupRecord.Member(label: $0.label, card: $0.card) }
        return GroupRecord.guestBox(relays: relays, owner: identity.card, peers: peers)
    }

    /// The groups whose relays hold holder messages for this identity: its groups, then its
    /// guest box.
    public static func mailGroups(keystore: Keystore, identity: Identity) -> [GroupRecord] {
        ((try? keystore.groups()) ?? []) + [guestBox(keystore: keystore, identity: identity)].compactMap { $0 }
    }

    /// The group of a holder request or ask, by id: the guest box's id is no stored group's.
    static func group(id: [UInt8], keystore: Keystore, identity: Identity) throws -> GroupRecord? {
        id == GroupRecord.guestBoxID ? guestBox(keystore: keystore, identity: identity) : try keystore.group(id: id)
    }

    /// How long relays keep a share offer or a piece request: a week, as long as a request
    /// may live (``RelayPieceRequest/maximumLifetime``).
    public static let offerLifetime: UInt64 = RelayPieceRequest.maximumLifetime

    /// A group that both this identity and `card` are members of: the named one, when it
    /// qualifies, else the first by name.
    public static func sharedGroup(with card: KeyCard, keystore: Keystore, identity: Identity, named: String? = nil) throws -> GroupRecord? {
        let groups = try named.map { [try keystore.group(named: $0)] } ?? keystore.groups()
        return groups.sorted { $0.name.value.lowercased() < $1.name.value.lowercased() }.first { group in
            group.members.contains { $0.card == identity.card } && group.members.contains { $0.card == card }
        }
    }

    /// Offers the bundle at `path` to `holder` through `group`. Returns which relays
    /// stored it.
    public static func offer(bundle path: String, to holder: Peer, in group: GroupRecord, keystore: Keystore,
                             identity: Identity) async throws -> Messenger.Stored {
        try await send(to: holder.card, in: group, lifetime: offerLifetime, keystore: keystore, identity: identity) { emit in
            try HolderRecord.shareOffer().withUnsafeBytes(emit)
            var bundle = try FileSource(path: path)
            try bundle.forEachChunk(emit)
        }
    }

    /// Asks `holder` through `group` for its piece of `recovery`'s secret, proving
    /// possession of `own` when this identity holds a share. The request is recorded once at
    /// least ``minimumRelays(_:)`` relays stored it.
    public static func ask(_ recovery: Recovery, holder: Peer, in group: GroupRecord, own: StoredSecret?, keystore: Keystore,
                           identity: Identity) async throws {
        let now = VaultClock.seconds()
        let left = UInt64(max(1, recovery.expires.timeIntervalSince1970 - Double(now)))
        let request = try RelayPieceRequest.make(secretID: recovery.secretID, dealer: recovery.dealer, holder: holder.card, own: own,
                                                 identity: identity, replyKey: recovery.replyPublicKey, lifetime: left, now: now)
        // Recorded first: an answer can come back before the slowest relay took the request.
        try keystore.recordAsk(recovery, nonce: request.nonce, holder: holder, groupID: group.id)
        do {
            let stored = try await send(to: holder.card, in: group, lifetime: left, keystore: keystore, identity: identity) { emit in
                try HolderRecord.pieceRequest(request).withUnsafeBytes(emit)
            }
            try stored.require(minimumRelays(group), of: group)
        } catch {
            try? keystore.forgetAsk(nonce: request.nonce)
            throw error
        }
    }

    /// Tells each holder whose answer `recovery` still waits for that it is over: their
    /// persons need not be asked any more (``HolderRecord/Kind/withdrawal``). Best effort:
    /// a holder not told answers into a recovery that ended, which says so and does nothing.
    public static func withdraw(_ recovery: Recovery, keystore: Keystore, identity: Identity) async {
        for ask in recovery.asks where ask.isPending {
            guard let peer = try? keystore.peers().first(where: { $0.card.agreementKey == ask.holderKey }),
                  let group = try? Self.group(id: ask.groupID, keystore: keystore, identity: identity) else { continue }
            _ = try? await send(to: peer.card, in: group, lifetime: 86_400, keystore: keystore, identity: identity) { emit in
                try HolderRecord.withdrawal(nonce: ask.nonce).withUnsafeBytes(emit)
            }
        }
    }

    /// Sends the answers of every request decided (or lapsed) since its last answer: the
    /// piece for an approval, a share stored, a denial. One that cannot be sent now is sent
    /// at the next call.
    /// Emergency waits that ended are released here only after `round`, a reading of the
    /// relays that began once they had ended and heard their dealer through
    /// (``RelayRound``); without one (a command that did not read the relays) they wait.
    public static func answerDecided(keystore: Keystore, identity: Identity, round: RelayRound?, report: inout HolderReport) async {
        let decided: [HolderRequest]
        do {
            try keystore.lapseExpiredRequests()
            if let round {
                let groups = try keystore.groups()
                try keystore.releaseEndedWaits(endedBy: round.started) { round.heardEverything(from: $0, in: groups, identity: identity) }
                for held in try keystore.holderRequests([.waiting]) where held.emergency == .waiting && held.releaseAt.map({ $0 <= round.started }) ?? false {
                    report.problems.append("\(held.peerLabel)'s emergency request \(held.id): its wait ended, but too few of the relays its dealer "
                                           + "could deny it through were read to know it was not denied; released once they are")
                }
            }
            decided = try keystore.holderRequests([.approved, .automatic, .denied, .expired])
        } catch {
            return report.problems.append("the requests through relays: \(VaultError.words(for: error))")
        }
        for request in decided {
            await answer(request, keystore: keystore, identity: identity, report: &report)
        }
        // Emergency access: what the dealers of shares held here should know, and the
        // decisions this identity made as a dealer.
        await EmergencyMail.tellDealers(keystore: keystore, identity: identity, report: &report)
        await EmergencyMail.sendDecisions(keystore: keystore, identity: identity, report: &report)
        for path in (try? keystore.forgetExpiredHolderRequests()) ?? [] { unlink(path) }
        // Answers kept for a request now forgotten are of no more use.
        let answers = keystore.home.directory + "/answers"
        if let kept = try? Set(keystore.holderRequests([.waiting, .approved, .automatic, .denied, .expired, .answered]).map(\.id)) {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: answers)) ?? [] where !kept.contains(String(name.prefix(8))) {
                unlink(answers + "/" + name)
            }
        }
        try? keystore.endExpiredRecoveries()
    }

    /// Answers one request as it stands now (a waiting one: that it waits). A decided one
    /// is claimed first, and its answer written once into `$VAULT_HOME/answers/ID` (the
    /// release made, and logged, once): when the relays cannot take it now, the next run
    /// sends the same answer again instead of releasing anew.
    static func answer(_ request: HolderRequest, keystore: Keystore, identity: Identity, report: inout HolderReport) async {
        let what = switch request.kind {
        case .piece: request.emergency == nil ? "piece request \(request.id)" : "emergency request \(request.id)"
        case .share: "share offer \(request.id)"
        case .role: "emergency rule (request \(request.id))"
        }
        let decided = request.state != .waiting
        do {
            // Claimed first: a piece goes out once, whoever else answers meanwhile.
            if decided { guard try keystore.claimAnswer(request) else { return } }
            guard let peer = try keystore.peers().first(where: { $0.card.agreementKey == request.peerKey }),
                  let group = try request.groupID.isEmpty
                    // A role offered over the LAN is answered through a group shared with its dealer, if any.
                    ? (decided ? sharedGroup(with: peer.card, keystore: keystore, identity: identity) : nil)
                    : Self.group(id: request.groupID, keystore: keystore, identity: identity) else {
                // The group or the peer is gone: nobody to answer, and nothing released.
                if decided, request.groupID.isEmpty { try? HolderDesk.answer(request, keystore: keystore, identity: identity) { _ in } }
                return
            }
            let answers = keystore.home.directory + "/answers"
            if mkdir(answers, 0o700) != 0 && errno != EEXIST { throw VaultError.fileSystem(path: answers, errno: errno) }
            // One file a state: a release written and not sent, then cancelled by the dealer's
            // denial, must not go out as the answer after all.
            let path = answers + "/" + request.id + "-" + request.state.rawValue
            for name in (try? FileManager.default.contentsOfDirectory(atPath: answers)) ?? []
            where name.hasPrefix(request.id + "-") && answers + "/" + name != path {
                unlink(answers + "/" + name)
            }
            do {
                if !FileManager.default.fileExists(atPath: path) {
                    let output = try OutputFile(path: path, shownAs: "the vault directory \(answers)")
                    try HolderDesk.answer(request, keystore: keystore, identity: identity, emit: output.write)
                    try output.commit()
                }
                let lifetime = UInt64(max(3600, request.expires.timeIntervalSince(VaultClock.now()) + 86_400))
                let stored = try await send(to: peer.card, in: group, lifetime: min(lifetime, offerLifetime), keystore: keystore,
                                            identity: identity) { emit in
                    var answer = try FileSource(path: path)
                    try answer.forEachChunk(emit)
                }
                try stored.require(minimumRelays(group), of: group)
                unlink(path)
            } catch {
                if decided { try? keystore.unclaimAnswer(request) }
                throw error
            }
            if decided { report.events.append(.answered(to: request.peerLabel, what: what)) }
        } catch {
            report.problems.append("could not answer \(request.peerLabel)'s \(what): \(VaultError.words(for: error)); tried again later")
        }
    }

    /// Fetches the holder messages waiting on the relays of the user's groups and takes each
    /// one, through the path `vault receive` reads them by (``Messenger/receive``); leaves
    /// everything else for `vault receive` and `vault sync`. With `refreshingGroups` it first
    /// asks the relays for new groups and new versions of the groups held (what a message
    /// from a member added since needs), and says which it took.
    public static func collect(keystore: Keystore, identity: Identity, refreshingGroups: Bool = false) async -> HolderReport {
        do {
            let received = try await Messenger.receive(groupName: nil, keystore: keystore, identity: identity, sink: nil,
                                                       holderMailOnly: true, refreshingGroups: refreshingGroups)
            var report = received.holders
            report.groups = received.groups.map(\.value)
            report.problems = received.distinctProblems + report.problems
            return report
        } catch {
            var report = HolderReport()
            report.problems.append(VaultError.words(for: error))
            return report
        }
    }

    /// ``collect(keystore:identity:refreshingGroups:)`` for at most `seconds`: what a command
    /// that only lists what waits (`vault requests`) spends on the relays when no serve reads
    /// them. Nil when the time ran out first (what was taken by then stays taken).
    public static func collect(keystore: Keystore, identity: Identity, within seconds: TimeInterval) async -> HolderReport? {
        await withTaskGroup(of: HolderReport?.self) { race in
            race.addTask { await collect(keystore: keystore, identity: identity) }
            race.addTask {
                try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
                return nil
            }
            defer { race.cancelAll() }
            return await race.next() ?? nil
        }
    }

    /// Takes a checked holder message that arrived in `group` (its bytes in the file at
    /// `path`). Returns whether it is done with, and so may be confirmed to the relays.
    static func received(_ message: IncomingObjectMessage, path: String, in group: GroupRecord, keystore: Keystore, identity: Identity,
                         spool: Spool, report: inout HolderReport) async -> Bool {
        guard let header = message.header else { return true }
        let plain = spool.newPath("holder.plain")
        defer { unlink(plain) }
        do {
            // The sender must be the member the group names, by its whole card. The record
            // held here may be older than the sender's membership (a member added since): the
            // message is not taken, nor confirmed, and waits on the relays for a newer record.
            guard let sender = group.members.first(where: { $0.card == header.sender }) else {
                // A guest this identity does not trust is nobody to answer: its message is
                // dropped, so that strangers cannot fill the guest box until they expire.
                if group.isGuestBox { return true }
                report.waitingForRecord.append(.init(group: group.name.value, message: header.messageIDHex, sender: header.sender.fingerprint))
                return false
            }
            // Recorded first: a second relay's copy, or the relay serving it again, is not
            // taken twice.
            guard try keystore.recordReceived(object: header) else { return true }
            let output = try OutputFile(path: plain)
            try ObjectMessage.open(message, path: path, recipient: identity, emit: output.write)
            try output.commit()
            var source = try FileSource(path: plain)
            let head = try HolderRecord.readHead(&source)
            let tail = HolderRecord.tailOffset(of: head)
            let who = sender.label.value
            switch head {
            case .shareOffer:
                let bundle = spool.newPath("offer.vshare")
                let copy = try OutputFile(path: bundle)
                var rest = try FileSource.skipping(Int(tail!), of: plain)
                try rest.forEachChunk(copy.write)
                try copy.commit()
                switch try HolderDesk.take(offer: bundle, messageID: header.messageID, from: sender.card, in: group,
                                           expires: header.expiresAt, keystore: keystore, identity: identity) {
                case .queued(let request):
                    queued(request, keystore: keystore, report: &report)
                    await answer(request, keystore: keystore, identity: identity, report: &report)
                case .refusedShare(let reason, let secretID, let index):
                    report.events.append(.refusedOffer(from: who, reason: reason))
                    _ = try await send(to: sender.card, in: group, lifetime: offerLifetime, keystore: keystore, identity: identity) { emit in
                        try HolderDesk.shareRefused(secretID: secretID, holder: index, emit: emit)
                    }
                case .refused, .automatic, .emergency, .duplicate:
                    break
                }
            case .pieceRequest(let request):
                switch try HolderDesk.take(request, from: sender.card, in: group, keystore: keystore, identity: identity) {
                case .refused(let refusal):
                    report.events.append(.refusedRequest(from: who, reason: refusal.description))
                    let lifetime = UInt64(max(3600, Double(request.expires) - VaultClock.now().timeIntervalSince1970))
                    _ = try await send(to: sender.card, in: group, lifetime: min(lifetime, offerLifetime), keystore: keystore,
                                       identity: identity) { emit in
                        try HolderDesk.refusal(nonce: request.nonce, refusal, emit: emit)
                    }
                case .queued(let taken):
                    queued(taken, keystore: keystore, report: &report)
                    await answer(taken, keystore: keystore, identity: identity, report: &report)
                case .automatic(let taken):
                    await answer(taken, keystore: keystore, identity: identity, report: &report)
                    report.events.append(.releasedAutomatically(to: who, secret: request.secretID.hex))
                case .emergency(let taken):
                    // (A decision of the dealer's that came first settled it already: answered below.)
                    if taken.state == .waiting, let described = ConsentQueue.describe(taken, keystore: keystore) {
                        report.events.append(.emergencyWait(described))
                    }
                    // The requester learns when it releases, and the dealer is told at once.
                    await answer(taken, keystore: keystore, identity: identity, report: &report)
                    await EmergencyMail.tellDealers(keystore: keystore, identity: identity, report: &report)
                case .refusedShare, .duplicate:
                    break
                }
            case .emergencyRule(let rule):
                try await EmergencyMail.received(rule, from: sender, in: group, keystore: keystore, identity: identity, report: &report)
            case .emergencyDecision(let decision):
                try await EmergencyMail.received(decision, from: sender, keystore: keystore, identity: identity, report: &report)
            case .roleAnswer(let secretID, let issued, let state):
                if let (label, role) = try EmergencyDesk.take(roleAnswer: secretID, issued: issued, state: state, from: sender.card,
                                                             keystore: keystore, identity: identity) {
                    // Left on the relays for the dealer's other machines, which show it too.
                    try keystore.keepUnconfirmed(message: header.messageID, until: header.expiresAt)
                    report.events.append(.answer(.role(label: label, state: role)))
                }
            case .emergencyNotice(let notice):
                // Checked first: what no machine of this identity would take is confirmed away.
                if let news = try EmergencyDesk.take(notice: notice, from: sender.card, keystore: keystore, identity: identity) {
                    // Left on the relays: every machine of the dealer must see it, to deny it.
                    try keystore.keepUnconfirmed(message: header.messageID, until: header.expiresAt)
                    report.events.append(.answer(.emergency(news)))
                }
            case .withdrawal(let nonce):
                if let withdrawn = try keystore.withdrawHolderRequest(nonce: nonce, from: sender.card.agreementKey) {
                    report.events.append(.withdrawn(from: who, request: withdrawn.id))
                }
            case .pieceAnswer(let nonce, let outcome, let prefix):
                report.events.append(.answer(try RecoveryDesk.take(answer: nonce, outcome: outcome, prefix: prefix,
                                                                   piece: tail.map { (plain, $0) }, from: sender.card,
                                                                   keystore: keystore, identity: identity)))
            case .shareAnswer(let secretID, _, let state):
                report.events.append(.answer(try RecoveryDesk.take(shareAnswer: secretID, state: state, from: sender.card,
                                                                   keystore: keystore, identity: identity)))
            }
            return true
        } catch {
            report.problems.append("holder message \(header.messageIDHex.prefix(8)) in \(group.name): \(VaultError.words(for: error))")
            switch error {
            case VaultError.storage, VaultError.fileSystem:
                // This machine failed (its disk), not the message: taken again next time.
                try? keystore.forgetReceived(object: header)
                return false
            default:
                return true
            }
        }
    }

    private static func queued(_ request: HolderRequest, keystore: Keystore, report: inout HolderReport) {
        if let described = ConsentQueue.describe(request, keystore: keystore) { report.events.append(.queued(described)) }
    }

    /// Writes one holder message to `recipient` (its record through `write`) and stores it
    /// whole on every relay of `group`; returns which stored it. `kept`: the relays keep
    /// it until it expires, confirmed or not (for the recipient's other machines).
    static func send(to recipient: KeyCard, in group: GroupRecord, lifetime: UInt64, kept: Bool = false, keystore: Keystore, identity: Identity,
                     write: @escaping ((UnsafeRawBufferPointer) throws -> Void) throws -> Void) async throws -> Messenger.Stored {
        let request = ObjectMessage.Request(groupID: group.id, kind: .holder, keyID: [UInt8](repeating: 0, count: 16), recipients: [recipient],
                                            lifetime: lifetime, deleteWhenConfirmed: !kept)
        return try await ObjectSync.send(request, group: group, keystore: keystore, identity: identity, entries: write)
    }
}
