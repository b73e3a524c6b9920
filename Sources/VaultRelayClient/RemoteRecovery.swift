import Foundation
import VaultCore
import VaultHolders

/// Recovery through relays (Docs/PROTOCOL.md §9): piece requests to the holders a recovery
/// still needs, each through a group the requester and that holder share, and the pieces
/// that come back, kept sealed to the recovery's reply key until it ends. It lives in the
/// keystore (``Recovery``), so a second `vault recover` picks up what arrived and asks
/// nobody twice.
public final class RemoteRecovery {
    /// What asking one holder did.
    public enum Asked: Sendable {
        /// Asked now, through this group (nil: the guest box of the relays pinned here).
        case asked(label: String, group: String?)
        /// Asked before, by an earlier run; where it stands.
        case before(label: String, state: Recovery.Ask.State, detail: String?, until: Date?)
        /// Cannot be asked through relays: the words say why.
        case unreachable(label: String, reason: String)
    }

    private let keystore: Keystore
    private let identity: Identity
    /// This identity's share of the secret, if it holds one.
    public let own: StoredSecret?
    /// The recovery as last read from the keystore.
    public private(set) var recovery: Recovery

    /// Starts (or resumes) the recovery of (`dealer`, `secretID`); requests live `lifetime`
    /// seconds, at most a week.
    public init(dealer: KeyCard, secretID: [UInt8], own: StoredSecret?, lifetime: UInt64, keystore: Keystore, identity: Identity) throws {
        self.keystore = keystore
        self.identity = identity
        self.own = own
        recovery = try keystore.startRecovery(dealer: dealer, secretID: secretID, holdsShare: own != nil, identity: identity, lifetime: lifetime)
        guard recovery.replyKey(identity) != nil else { throw VaultError.keystoreCorrupt("the recovery's reply key does not open") }
    }

    /// The reply key pieces are sealed to.
    public var replyKey: ReplyKey { recovery.replyKey(identity)! }

    /// Asks each of `holders` not asked before, through a group both share (the named one
    /// with `group`).
    public func ask(_ holders: [Peer], group: String? = nil) async -> [Asked] {
        var outcomes: [Asked] = []
        for holder in holders {
            let label = holder.label.value
            if let ask = recovery.asks.first(where: { $0.holderKey == holder.card.agreementKey }) {
                // A refusal that time may mend (the holder had not yet kept its share,
                // trusted this card, joined the group, or had room) is asked again.
                guard ask.state == .refused, let detail = ask.detail, Self.passing.contains(detail) else {
                    outcomes.append(.before(label: label, state: ask.state, detail: ask.detail, until: ask.until))
                    continue
                }
                try? keystore.forgetAsk(nonce: ask.nonce)
            }
            do {
                // With no group shared, as a guest through the relays pinned here (a new
                // machine in no group yet: Docs/RELAY.md, "The guest box").
                guard let shared = try HolderMail.sharedGroup(with: holder.card, keystore: keystore, identity: identity, named: group)
                        ?? (group == nil ? HolderMail.guestBox(keystore: keystore, identity: identity) : nil) else {
                    outcomes.append(.unreachable(label: label, reason: group.map { "not a member of group \($0)" }
                                                    ?? "no group of yours has it as a member, and no relay is pinned here to ask it through"))
                    continue
                }
                try await HolderMail.ask(recovery, holder: holder, in: shared, own: own, keystore: keystore, identity: identity)
                outcomes.append(.asked(label: label, group: shared.isGuestBox ? nil : shared.name.value))
            } catch {
                outcomes.append(.unreachable(label: label, reason: VaultError.words(for: error)))
            }
        }
        try? reload()
        return outcomes
    }

    /// Takes what the relays hold for this identity now (answers, and anything else for a
    /// holder), and reads the recovery again.
    /// With `takingMail` false (a recovery run inside `vault serve`, whose watch takes what
    /// the relays hold and asks its person about requests on its own terminal), only the
    /// cursors are read, for ``waitForAnswers(until:)``, and the keystore.
    public func collect(takingMail: Bool = true) async -> HolderReport {
        let groups = HolderMail.mailGroups(keystore: keystore, identity: identity)
        cursors = await RelayMail.latest(groups: groups, identity: identity)
        let report = takingMail ? await HolderMail.collect(keystore: keystore, identity: identity) : HolderReport()
        try? reload()
        return report
    }

    /// Waits until the relays list something new for this identity since the last
    /// ``collect()``, another process of this keystore (a `vault serve` beside it) took an
    /// answer to this recovery, or `until`. A serve takes the answer off the relays first,
    /// so the relays alone would say nothing until their wait ran out.
    @discardableResult
    public func waitForAnswers(until: Date) async -> WaitEnd {
        let keystore = keystore, identity = identity, cursors = cursors
        let before = Self.states(recovery)
        let (dealer, secretID) = (recovery.dealer, recovery.secretID)
        return await withTaskGroup(of: WaitEnd.self) { waiting in
            waiting.addTask {
                await RelayMail.waitForMail(groups: HolderMail.mailGroups(keystore: keystore, identity: identity), identity: identity, after: cursors, until: until)
                return Date() < until ? .mail : .deadline
            }
            waiting.addTask {
                while Date() < until, !Task.isCancelled {
                    try? await Task.sleep(nanoseconds: UInt64(Self.keystoreLook * 1e9))
                    guard let now = try? keystore.recovery(dealer: dealer, secretID: secretID) else { return .deadline }
                    if Self.states(now) != before { return .keystore }
                }
                return .deadline
            }
            let end = await waiting.next() ?? .deadline
            waiting.cancelAll()
            return end
        }
    }

    /// Why `waitForAnswers(until:)` returned.
    public enum WaitEnd: Sendable, Equatable {
        /// A relay holds mail newer than the recovery last read.
        case mail
        /// Another process (a serve) changed the recovery's asks in the keystore.
        case keystore
        /// The time given ran out (or the keystore could not be read).
        case deadline
    }

    /// How often a waiting recovery looks at the keystore for answers another process took.
    static let keystoreLook: TimeInterval = 0.25

    private static func states(_ recovery: Recovery) -> [String] {
        recovery.asks.map { "\($0.nonce.hex) \($0.state.rawValue)" }
    }

    private var cursors: RelayMail.Cursors = [:]

    /// Reads the recovery again (a serve's watch may have taken answers meanwhile).
    public func reload() throws {
        if let current = try keystore.recovery(dealer: recovery.dealer, secretID: recovery.secretID) { recovery = current }
    }

    /// Refusals that may not hold on a later run, by the words they are kept in.
    private static let passing: Set<String> = Set([Refusal.busy, .unknownSecret, .untrusted, .notAMember, .expired].map(\.description))

    /// The pieces released so far (but by holders in `excluding`, by X25519 key: they gave
    /// theirs over the LAN), and (for a requester that holds no share) the header to check
    /// them against: the first answering holder's.
    public func released(excluding: Set<[UInt8]> = []) throws -> (files: [String], header: BundleHeader?) {
        let asks = recovery.asks.filter { $0.state == .released && $0.piece != nil && !excluding.contains($0.holderKey) }
        let header = try own?.header ?? asks.first.flatMap { ask in
            try ask.prefix.map { try RecoveryDesk.header(of: recovery, prefix: $0, sender: senderCard(ask), keystore: keystore) }
        }
        return (asks.compactMap(\.piece), header)
    }

    /// Whether every holder asked has answered (with its piece or without): nothing more
    /// will come.
    public var nothingMoreWillCome: Bool {
        !recovery.asks.isEmpty && !recovery.asks.contains { $0.isPending }
    }

    /// Ends the recovery: its rows and received pieces go.
    public func end() {
        try? keystore.endRecovery(recovery)
    }

    /// Ends a recovery that succeeded: the holders still asked are told it is over (as a
    /// requester on the LAN stops asking), so that nobody is asked about it any more.
    public func complete() async {
        try? reload()
        await HolderMail.withdraw(recovery, keystore: keystore, identity: identity)
        end()
    }

    private func senderCard(_ ask: Recovery.Ask) throws -> KeyCard {
        guard let peer = try keystore.peers().first(where: { $0.card.agreementKey == ask.holderKey }) else {
            throw VaultError.unknownPeer(ask.holderLabel)
        }
        return peer.card
    }
}
