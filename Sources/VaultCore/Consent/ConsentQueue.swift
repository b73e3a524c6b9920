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
    private var relayDecided: @Sendable (HolderRequest) -> Void = { _ in }
    private let onNew: @Sendable (ReleaseApprovals.Request) -> Void

    /// A queue over `keystore`'s requests through relays and `lan`'s; `onNew` hears of each
    /// new request through relays (LAN requests are announced by `lan` itself).
    public init(keystore: Keystore, lan: ReleaseApprovals, onNew: @escaping @Sendable (ReleaseApprovals.Request) -> Void = { _ in }) {
        self.keystore = keystore
        self.lan = lan
        self.onNew = onNew
    }

    /// Who answers a request through relays once it is decided (serve's relay watcher).
    public func onRelayDecision(_ body: @escaping @Sendable (HolderRequest) -> Void) {
        lock.withLock { relayDecided = body }
    }

    /// Every request waiting for an answer, oldest first.
    public func waiting(now: Date = Date()) -> [ReleaseApprovals.Request] {
        let relayed = ((try? keystore.holderRequests([.waiting], now: now)) ?? []).compactMap { Self.describe($0, keystore: keystore) }
        return (lan.waiting(now: now) + relayed).sorted { $0.asked < $1.asked }
    }

    /// Approves or denies the waiting request whose id starts with `prefix`.
    /// The prefix must match one request of both queues together: one that matches a LAN
    /// request and a relay request decides neither.
    public func decide(_ prefix: String, approve: Bool, now: Date = Date()) -> ReleaseApprovals.Request? {
        let key = prefix.lowercased()
        let relayed = ((try? keystore.holderRequests([.waiting], now: now)) ?? []).contains { $0.id.hasPrefix(key) }
        if !relayed, let decided = lan.decide(prefix, approve: approve, now: now) { return decided }
        let onLAN = { self.lan.waiting(now: now).contains { $0.id.hasPrefix(key) } }
        guard let decided = try? keystore.decideHolderRequest(prefix, approve: approve, unless: onLAN, now: now) else { return nil }
        lock.withLock { relayDecided }(decided)
        return Self.describe(decided, keystore: keystore)
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
        let group = (try? keystore.group(id: request.groupID))?.name.value ?? String(request.groupID.hex.prefix(8))
        switch request.kind {
        case .piece:
            guard let asked = request.pieceRequest,
                  let secret = try? keystore.secrets().first(where: { $0.header.rowID == request.secretRow ?? [] }) else { return nil }
            let header = secret.header
            var described = ReleaseApprovals.Request(id: request.id, peer: request.peerLabel, secretID: header.secretIDHex,
                                                     type: header.type.description, description: String(header.description.prefix(200)),
                                                     requester: asked.requester, holder: header.holderIndex, asked: request.received,
                                                     expires: request.expires)
            described.via = "relays of \(group)"
            described.holdsNoShare = asked.holdsNoShare
            (described.threshold, described.count) = (header.threshold, header.count)
            return described
        case .share:
            guard let path = request.bundlePath, let header = try? BundleHeader(bundleAt: path) else { return nil }
            var described = ReleaseApprovals.Request(id: request.id, peer: request.peerLabel, secretID: header.secretIDHex,
                                                     type: header.type.description, description: String(header.description.prefix(200)),
                                                     requester: 1, holder: header.holderIndex, asked: request.received,
                                                     expires: request.expires)
            described.via = "relays of \(group)"
            described.kind = "share"
            (described.threshold, described.count) = (header.threshold, header.count)
            return described
        }
    }
}
