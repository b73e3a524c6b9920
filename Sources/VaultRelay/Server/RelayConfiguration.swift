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
    /// Requests a second, per caller identity and per client address, with bursts of ten
    /// times as many.
    public var requestsPerSecond: Double = 50

    /// A configuration with defaults for everything but the store.
    public init(store: Store) { self.store = store }
}
