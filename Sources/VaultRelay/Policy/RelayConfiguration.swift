import Foundation

/// How a relay runs: `vault relay serve`'s options.
public struct RelayConfiguration: Sendable {
    /// Where the relay keeps its data.
    public enum Store: Sendable, Equatable {
        /// One SQLite file, the embedded default.
        case sqlite(path: String)
        /// A PostgreSQL database, `postgres://USER@HOST[:PORT]/DATABASE`, which several
        /// relay processes may share.
        case postgres(url: String)

        /// `sqlite:PATH` or `postgres://…`.
        public init(parsing text: String) throws {
            if text.hasPrefix("sqlite:"), text.count > 7 {
                self = .sqlite(path: String(text.dropFirst(7)))
            } else if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
                _ = try PostgresRelayStore.Location(url: text)
                self = .postgres(url: text)
            } else {
                throw RelayStartFailure("--store takes sqlite:PATH or postgres://USER@HOST[:PORT]/DATABASE")
            }
        }
    }

    /// Who may own groups on the relay (Docs/RELAY.md, "Operator policy").
    public enum Owners: String, Sendable, CaseIterable {
        /// Any key: the default for a relay that listens on loopback only.
        case anyone
        /// The cards of ``ownerCards`` and the keys that redeemed an invite: the default for
        /// a relay that listens beyond loopback.
        case listed
    }

    /// Who may make share links on the relay.
    public enum LinkMakers: String, Sendable, CaseIterable {
        /// Anyone, anonymous links under a per-address quota and a shorter lifetime.
        case anyone
        /// Only signed requests from the cards of ``ownerCards`` and invited owners.
        case listed
    }

    /// The address to listen on.
    public var host: String = "127.0.0.1"
    /// The port; 0 picks a free one (printed when listening).
    public var port: Int = 7780
    /// PEM certificate chain and key for TLS; plain HTTP without them.
    public var tls: (certificate: String, key: String)?
    /// Where the data lives.
    public var store: Store
    /// The longest time to live a message may ask for, seconds.
    public var maximumTTL: UInt64 = 7 * 86400
    /// The longest message share, bytes.
    public var maximumMessage: UInt64 = 64 << 20
    /// The most bytes of unexpired messages one group may keep.
    public var groupQuota: UInt64 = 1 << 30
    /// The largest share link's blob, bytes.
    public var maximumLink: UInt64 = 32 << 20
    /// The most bytes of unexpired share links, all together.
    public var linkQuota: UInt64 = 1 << 30
    /// Links a client address may create, a minute, in bursts of as many.
    public var linksPerMinute: Double = 60
    /// Seconds between sweeps of expired messages.
    public var sweepInterval: UInt64 = 60
    /// Requests a second, per caller identity, with bursts of ten times as many.
    public var requestsPerSecond: Double = 50
    /// Requests a second, per client address (IPv6 by /64), with bursts of ten times as
    /// many: raised behind a proxy, whose clients all share its address.
    public var addressRequestsPerSecond: Double = 50

    /// Who may own groups; nil: ``Owners/anyone`` on loopback, ``Owners/listed`` beyond.
    public var owners: Owners?
    /// The Ed25519 keys of the cards `--owners FILE` lists: these may own groups, and make
    /// signed links not bound by per-address quotas.
    public var ownerCards: Set<[UInt8]> = []
    /// Groups one owner may register.
    public var groupsPerOwner = 100
    /// The most bytes of unexpired messages and group records one owner's groups may keep.
    public var ownerQuota: UInt64 = 4 << 30
    /// The most bytes of unexpired messages and group records on the relay, all together.
    public var totalQuota: UInt64 = 16 << 30
    /// Who may make share links.
    public var linkMakers: LinkMakers = .anyone
    /// The longest time to live of a link made without a signature from a listed card.
    public var anonymousLinkTTL: UInt64 = 86400
    /// The most bytes of unexpired links one client address (IPv4, or IPv6 /64) may keep.
    public var linkQuotaPerAddress: UInt64 = 64 << 20
    /// The most unexpired links one client address may keep.
    public var linksPerAddress = 100
    /// Connection limits and deadlines (Docs/RELAY.md, "Connections").
    public var connections = ConnectionLimits()

    /// A configuration with defaults for everything but the store.
    public init(store: Store) { self.store = store }

    /// Whether the relay listens on loopback only, where its users are this machine's.
    public var isLoopback: Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// Who may own groups, with the default for where the relay listens: a relay reachable
    /// from elsewhere must not be free storage for anyone who makes a key.
    public var ownerPolicy: Owners { owners ?? (isLoopback ? .anyone : .listed) }
}
