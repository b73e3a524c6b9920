import VaultCore
import Foundation

/// Piece requests waiting for the holder's consent, inside `vault serve`.
///
/// A request that passed every check (trusted peer, proof of possession on its channel) is
/// not answered with the piece at once: it waits here until the person approves or denies
/// it (`vault approve ID`, `vault deny ID`, or serve's terminal), or its time runs out. The
/// requester asks again on a new connection, proving possession again each time, and gets
/// the piece once approved. One approval releases one piece, once.
public final class ReleaseApprovals: @unchecked Sendable {
    /// A request as the person sees it.
    public struct Request: Sendable, Codable {
        /// A short random id to approve or deny it by (8 hex digits).
        public let id: String
        /// The peer that asks, by its label here.
        public let peer: String
        /// The secret's id (hex), type and public description.
        public let secretID: String
        public let type: String
        public let description: String
        /// The holder index the peer proved, and this holder's own.
        public let requester: Int
        public let holder: Int
        /// When it was first asked.
        public let asked: Date
        /// When it expires unanswered (once answered: when the answer lapses unused).
        public internal(set) var expires: Date
        /// How it came: "LAN", or "relays of GROUP".
        public var via = "LAN"
        /// What is asked: "piece" (a piece of a share held here), "share" (keeping a
        /// share a dealer offers through relays), "role" (taking a dealer's emergency rule),
        /// "emergency" (a trustee's emergency request, released at ``releaseAt`` unless the
        /// dealer denies it) or, for a dealer, "watch" (an emergency request its holders
        /// told of, which it may deny or approve).
        public var kind = "piece"
        /// The secret's local name here, if it has one.
        public var name: String?
        /// Emergency access: the secret's dealer and the trustee, by their labels here (or
        /// fingerprints), the rule's wait in seconds, when the wait ends, and (for a dealer)
        /// the holders that told of the request.
        public var dealer: String?
        public var trustee: String?
        public var wait: UInt64?
        public var releaseAt: Date?
        public var through: [String]?
        /// A request from someone who holds no share of the secret (a new machine of its
        /// owner, through relays): it proves nothing, and is never released without asking.
        public var holdsNoShare = false
        /// The fingerprints of the requester's card and of the secret's dealer (requests
        /// through relays), for a person to compare with the ones it checked face to face.
        public var peerFingerprint: String?
        public var dealerFingerprint: String?
        /// The secret's k and n, where known (requests through relays).
        public var threshold = 0
        public var count = 0
    }

    /// Where a request stands when the peer asks (again).
    public enum Standing: Equatable, Sendable {
        /// Waiting; `new` the first time it is seen. `seconds` left to answer.
        case waiting(id: String, seconds: Int, new: Bool)
        /// Approved: release now (the approval is used up).
        case approved
        /// Denied (the refusal is reported once, then forgotten).
        case denied
        /// Nobody answered in time.
        case timedOut
        /// Too many requests wait already; nobody was asked.
        case busy
    }

    private enum State { case waiting, approved, denied }

    private struct Entry {
        var request: Request
        var state: State
        /// When the requester last asked. A requester asks again every second while it
        /// waits; one that stopped (it had enough pieces elsewhere, or gave up) has withdrawn
        /// the request, which then must not be approved by mistake.
        var lastAsked: Date
        /// Which peer key and secret this is, for matching a renewed ask.
        let peerKey: [UInt8]
        let secretID: [UInt8]
        /// The share itself: (dealer, id), so an approval for one dealer's secret never
        /// releases another's that reuses its id.
        let share: [UInt8]
    }

    private var entries: [String: Entry] = [:]
    private let lock = NSLock()
    private let window: TimeInterval
    private let onNew: @Sendable (Request) -> Void

    /// Requests wait `window` seconds for an answer; `onNew` hears of each new one (serve
    /// logs it and, on a terminal, asks).
    public init(window: TimeInterval = ConsentLimits.approvalSeconds, onNew: @escaping @Sendable (Request) -> Void = { _ in }) {
        self.window = window
        self.onNew = onNew
    }

    /// Where the request of `peer` (proved as `requester`) for `header`'s secret stands,
    /// recording it as new if it is.
    package func stand(peer: Peer, header: BundleHeader, requester: Int, now: Date = VaultClock.now()) -> Standing {
        let key = peer.card.agreementKey
        let (standing, created) = lock.withLock { () -> (Standing, Request?) in
            if let (id, entry) = entries.first(where: { $0.value.peerKey == key && $0.value.share == header.rowID }) {
                switch entry.state {
                case .approved where entry.request.expires > now:
                    entries[id] = nil
                    return (.approved, nil)
                case .approved:
                    entries[id] = nil
                    return (.timedOut, nil)
                case .denied:
                    entries[id] = nil
                    return (.denied, nil)
                case .waiting where entry.request.expires <= now:
                    entries[id] = nil
                    return (.timedOut, nil)
                case .waiting where Self.abandoned(entry, now: now):
                    entries[id] = nil  // withdrawn: this ask starts a new request below
                case .waiting:
                    entries[id]?.lastAsked = now
                    return (.waiting(id: id, seconds: Int(entry.request.expires.timeIntervalSince(now).rounded(.up)), new: false), nil)
                }
            }
            // Bounded: a flood of distinct requests cannot grow the table without limit. An
            // entry outlives its expiry by one window, to tell its requester how it ended.
            entries = entries.filter {
                $0.value.request.expires.addingTimeInterval(window) > now && !($0.value.state == .waiting && Self.abandoned($0.value, now: now))
            }
            guard entries.count < ConsentLimits.pendingApprovals else { return (.busy, nil) }
            var id: String
            repeat { id = SecureRandom().bytes(4).hex } while entries[id] != nil
            let request = Request(id: id, peer: peer.label.value, secretID: header.secretIDHex, type: header.type.description,
                                  description: String(header.description.prefix(200)), requester: requester,
                                  holder: header.holderIndex, asked: now, expires: now.addingTimeInterval(window))
            entries[id] = Entry(request: request, state: .waiting, lastAsked: now, peerKey: key, secretID: header.secretID,
                                share: header.rowID)
            return (.waiting(id: id, seconds: Int(window), new: true), request)
        }
        if let created { onNew(created) }
        return standing
    }

    /// Whether `peer` has a request for `secretID` open here: asking again about it is not a
    /// new request, so it does not count against the rate limit.
    package func isOpen(peerKey: [UInt8], secretID: [UInt8]) -> Bool {
        // Only a request still waiting (and asked about), or answered and not yet told: a
        // lapsed one gives no way around the rate limit.
        let now = VaultClock.now()
        return lock.withLock {
            entries.values.contains {
                $0.peerKey == peerKey && $0.secretID == secretID && ($0.state != .waiting || Self.isOpenForDecision($0, now: now))
            }
        }
    }

    /// Whether the requester stopped asking: it withdrew the request.
    private static func abandoned(_ entry: Entry, now: Date) -> Bool {
        now.timeIntervalSince(entry.lastAsked) > ConsentLimits.approvalAbandonSeconds
    }

    private static func isOpenForDecision(_ entry: Entry, now: Date) -> Bool {
        entry.state == .waiting && entry.request.expires > now && !abandoned(entry, now: now)
    }

    /// The requests waiting for an answer, oldest first.
    public func waiting(now: Date = VaultClock.now()) -> [Request] {
        lock.withLock { entries.values.filter { Self.isOpenForDecision($0, now: now) }.map(\.request) }
            .sorted { $0.asked < $1.asked }
    }

    /// Approves or denies the waiting request whose id starts with `prefix` (at least 4 hex
    /// digits). Returns it, or nil when no single waiting request matches.
    public func decide(_ prefix: String, approve: Bool, now: Date = VaultClock.now()) -> Request? {
        let prefix = prefix.lowercased()
        guard prefix.count >= 4 else { return nil }
        return lock.withLock { () -> Request? in
            let matches = entries.filter { $0.key.hasPrefix(prefix) && Self.isOpenForDecision($0.value, now: now) }
            guard matches.count == 1, let (id, entry) = matches.first else { return nil }
            entries[id]?.state = approve ? .approved : .denied
            // An approval is good for one release, picked up by a requester that is still
            // asking (it asks every second): a withdrawn request must not come back approved.
            entries[id]?.request.expires = now.addingTimeInterval(2 * ConsentLimits.approvalAbandonSeconds)
            return entry.request
        }
    }
}
