import VaultCore
import Foundation

/// The one consent queue of a holder: what waits for its person's yes or no, however it
/// came. Piece requests over the LAN wait in memory (``ReleaseApprovals``: their requester
/// stays connected and asks again); piece requests and share offers through relays wait in
/// the keystore (``HolderRequest``: friends answer in hours, across restarts). `vault
/// serve` owns one instance; its terminal, `vault requests`, `vault approve` and `vault
/// deny` all go through it, and so do the LAN server and the relay watcher.
public final class ConsentQueue: @unchecked Sendable {
    /// The LAN's requests.
    public let lan: ReleaseApprovals
    private let keystore: Keystore
    private let lock = NSLock()
    private var relayDecided: @Sendable () -> Void = {}
    private let onNew: @Sendable (ReleaseApprovals.Request) -> Void

    /// A queue over `keystore`'s requests through relays and `lan`'s; `onNew` hears of each
    /// new request through relays (LAN requests are announced by `lan` itself).
    public init(keystore: Keystore, lan: ReleaseApprovals, onNew: @escaping @Sendable (ReleaseApprovals.Request) -> Void = { _ in }) {
        self.keystore = keystore
        self.lan = lan
        self.onNew = onNew
    }

    /// Who answers a request through relays once it is decided, or sends a dealer's
    /// decision (serve's relay watcher).
    public func onRelayDecision(_ body: @escaping @Sendable () -> Void) {
        lock.withLock { relayDecided = body }
    }

    /// Every request waiting for an answer, oldest first: and, for a dealer, the emergency
    /// requests its holders told of that it may still deny.
    public func waiting(now: Date = VaultClock.now()) -> [ReleaseApprovals.Request] {
        let relayed = ((try? keystore.holderRequests([.waiting], now: now)) ?? []).compactMap { Self.describe($0, keystore: keystore) }
        let watched = ((try? keystore.emergencyWatches()) ?? []).filter(\.isOpen).compactMap { Self.describe($0, keystore: keystore) }
        return (lan.waiting(now: now) + relayed + watched).sorted { $0.asked < $1.asked }
    }

    /// Approves or denies the waiting request whose id starts with `prefix`.
    /// The prefix must match one request of the queues together: one that matches a LAN
    /// request and a relay request decides neither. For a dealer's emergency request,
    /// denying cancels it at every holder, approving ends the waits.
    public func decide(_ prefix: String, approve: Bool, now: Date = VaultClock.now()) -> ReleaseApprovals.Request? {
        let key = prefix.lowercased()
        let relayed = ((try? keystore.holderRequests([.waiting], now: now)) ?? []).contains { $0.id.hasPrefix(key) }
        let watched = ((try? keystore.emergencyWatches()) ?? []).contains { $0.isOpen && $0.id.hasPrefix(key) }
        if !relayed && !watched, let decided = lan.decide(prefix, approve: approve, now: now) { return decided }
        let onLAN = { self.lan.waiting(now: now).contains { $0.id.hasPrefix(key) } }
        if watched {
            guard !relayed, let decided = try? keystore.decideEmergencyWatch(prefix, approve: approve, unless: onLAN, now: now) else { return nil }
            lock.withLock { relayDecided }()
            return Self.describe(decided, keystore: keystore, open: true)
        }
        guard let decided = try? keystore.decideHolderRequest(prefix, approve: approve, unless: onLAN, now: now) else { return nil }
        lock.withLock { relayDecided }()
        return Self.describe(decided, keystore: keystore)
    }

    /// What a word given to `vault deny` names among `waiting` (as ``waiting(now:)`` lists
    /// them): the requests whose id starts with it (at least 4 hex digits); else, when it
    /// is a trusted peer's label, every request that peer makes (and every emergency
    /// request with it as the trustee); else, when it names a secret held here (its name or
    /// id), every request about that secret. An id comes first: it is what `vault requests`
    /// prints. Approving takes one request by its id only, never a set.
    public static func requests(named word: String, in waiting: [ReleaseApprovals.Request],
                                keystore: Keystore) -> (requests: [ReleaseApprovals.Request], by: Naming) {
        let key = word.lowercased()
        if key.count >= 4, key.allSatisfy(\.isHexDigit) {
            let byID = waiting.filter { $0.id.hasPrefix(key) }
            if !byID.isEmpty { return (byID, .id) }
        }
        if let peer = try? keystore.peer(named: word) {
            let label = peer.label.value
            return (waiting.filter { $0.kind == "watch" ? $0.trustee == label : $0.peer == label }, .peer(label))
        }
        if let secret = try? keystore.secret(matching: word) {
            return (waiting.filter { $0.secretID == secret.header.secretIDHex }, .secret(secret.name ?? secret.header.secretIDHex))
        }
        return ([], .nothing)
    }

    /// What a word given to `vault deny` turned out to name.
    public enum Naming: Equatable, Sendable {
        case id
        /// A trusted peer, by its label: the requester, or an emergency request's trustee.
        case peer(String)
        /// A secret, by its name here or its id.
        case secret(String)
        /// Nothing known here.
        case nothing
    }

    /// A new request through relays was queued: its prompt and log line.
    public func announce(_ request: HolderRequest) {
        if let described = Self.describe(request, keystore: keystore) { onNew(described) }
    }

    /// Whether a request through relays still waits (for a prompt to withdraw itself).
    public func isWaiting(_ id: String) -> Bool {
        waiting().contains { $0.id == id }
    }

    /// A request through relays as its person sees it: who asks for what, as for one over
    /// the LAN. Nil when what it is about is gone (the share was removed meanwhile).
    public static func describe(_ request: HolderRequest, keystore: Keystore) -> ReleaseApprovals.Request? {
        let group = request.groupID.isEmpty ? nil : (try? keystore.group(id: request.groupID))?.name.value ?? String(request.groupID.hex.prefix(8))
        // A guest shares no group here: it asked through a relay this identity uses.
        let via = request.groupID == GroupRecord.guestBoxID ? "relays, as a guest in no group of yours" : group.map { "relays of \($0)" } ?? "LAN"
        let secrets = (try? keystore.secrets()) ?? []
        func about(_ header: BundleHeader, requester: Int) -> ReleaseApprovals.Request {
            var described = ReleaseApprovals.Request(id: request.id, peer: request.peerLabel, secretID: header.secretIDHex,
                                                     type: header.type.description, description: String(header.description.prefix(200)),
                                                     requester: requester, holder: header.holderIndex, asked: request.received,
                                                     expires: request.expires)
            described.via = via
            described.name = secrets.first { $0.header.rowID == header.rowID }?.name
            (described.threshold, described.count) = (header.threshold, header.count)
            return described
        }
        switch request.kind {
        case .piece:
            guard let asked = request.pieceRequest, let secret = secrets.first(where: { $0.header.rowID == request.secretRow ?? [] }) else {
                return nil
            }
            var described = about(secret.header, requester: asked.requester)
            described.holdsNoShare = asked.holdsNoShare
            // Whose secret it is, and whose card asks: a requester that holds no share
            // claims to be the dealer's new machine, which only the person can judge.
            described.dealer = try? EmergencyDesk.label(of: secret.header.dealer, keystore: keystore)
            described.dealerFingerprint = secret.header.dealer.fingerprint
            described.peerFingerprint = asked.requesterCard.fingerprint
            if let releaseAt = request.releaseAt {
                described.kind = "emergency"
                described.releaseAt = releaseAt
            }
            return described
        case .share:
            guard let path = request.bundlePath, let header = try? BundleHeader(bundleAt: path) else { return nil }
            var described = about(header, requester: 1)
            described.kind = "share"
            return described
        case .role:
            // The share may still wait as an offer beside it.
            let offered = ((try? keystore.holderRequests([.waiting, .approved])) ?? [])
                .first { $0.kind == .share && $0.secretRow == request.secretRow }.flatMap(\.bundlePath).flatMap { try? BundleHeader(bundleAt: $0) }
            guard let rule = request.rule, let header = secrets.first(where: { $0.header.rowID == rule.secretRow })?.header ?? offered else {
                return nil
            }
            var described = about(header, requester: 0)
            described.kind = "role"
            described.dealer = request.peerLabel
            described.trustee = try? EmergencyDesk.label(of: rule.trustee, keystore: keystore)
            described.wait = rule.wait
            return described
        }
    }

    /// A dealer's emergency request as it is listed: nil when its secret is gone. `open`
    /// describes one just decided as it stood.
    public static func describe(_ watch: EmergencyWatch, keystore: Keystore, open: Bool = false) -> ReleaseApprovals.Request? {
        guard let secret = try? keystore.secrets().first(where: { $0.header.rowID == watch.secretRow }) else { return nil }
        let header = secret.header
        let waiting = watch.holders.filter { $0.state == .waiting }
        let releaseAt = waiting.compactMap(\.releaseAt).min() ?? watch.firstSeen
        var described = ReleaseApprovals.Request(id: watch.id, peer: watch.trusteeLabel, secretID: header.secretIDHex, type: header.type.description,
                                                 description: String(header.description.prefix(200)), requester: 0, holder: header.holderIndex,
                                                 asked: watch.asked, expires: releaseAt)
        described.via = "relays"
        described.kind = "watch"
        described.name = secret.name
        described.trustee = watch.trusteeLabel
        described.releaseAt = releaseAt
        described.through = (open ? watch.holders.filter { $0.state != .untold } : waiting).map(\.label)
        (described.threshold, described.count) = (header.threshold, header.count)
        return described
    }
}
