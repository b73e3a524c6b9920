/// Where a relay keeps share links (Docs/LINKS.md, "Relay"): the same stores as messages,
/// with the same expiry rules. A link's row says how many views are left; a view is taken
/// by one atomic statement, so two claims of a link's last view cannot both succeed.
protocol LinkStore: Sendable {
    /// Starts storing a link: its row, not yet served, or the quota it would pass: all
    /// links together over `quota`, or its source's links over `perSource`.
    func begin(link: NewLink, quota: UInt64, perSource: SourceQuota, now: UInt64) async throws -> LinkBegin
    /// Appends the next chunk (at most 64 KiB) of a link being stored.
    func append(linkChunk: [UInt8], index: Int, to link: Int64) async throws
    /// Serves the link from now on.
    func finish(link: Int64) async throws
    /// Drops a link: one not finished, one deleted by its owner, or one whose last view was served.
    func delete(link: Int64) async throws

    /// The link if it is served, unexpired and has a view left.
    func link(id: [UInt8], now: UInt64) async throws -> StoredLink?
    /// Spends one attempt of the link's allowance of claims and delete tokens, in one
    /// statement, before anything is compared: the allowance lives in the store, so every
    /// process sharing it spends from one count, and concurrent attempts cannot all pass
    /// the check before any is counted. A token bucket of `burst` attempts refilled one per
    /// `interval` milliseconds, kept as the time it is full again (GCRA). `now` in
    /// milliseconds.
    func spendAttempt(link id: [UInt8], now: UInt64, burst: UInt64, interval: UInt64) async throws -> AttemptSpent
    /// Gives back an attempt that held the right secret: only wrong guesses use up the
    /// allowance.
    func refundAttempt(link row: Int64, interval: UInt64) async throws
    /// Takes one view of the link, atomically: the views left after it, or nil when none
    /// was left (another claim took the last) or it expired.
    func takeView(link: Int64, now: UInt64) async throws -> Int?
    /// Chunk `index` of a link, nil past its last.
    func linkChunk(_ index: Int, of link: Int64) async throws -> [UInt8]?
}

/// What starting a link did.
enum LinkBegin: Equatable, Sendable {
    case started(Int64)
    /// All links together would pass the relay's link quota.
    case overQuota
    /// The links of its source (a client address, or its IPv6 /64) would pass their quota.
    case overSourceQuota
}

/// What one source (a client address's HMAC) may keep in unexpired links.
struct SourceQuota: Sendable {
    let bytes: UInt64
    let count: Int
}

/// Whether an attempt at a link could be spent.
enum AttemptSpent: Equatable, Sendable {
    /// Spent: compare the secret.
    case spent
    /// None left now: refuse without comparing.
    case exhausted
    /// No such link is served.
    case gone
}

/// A link about to be stored.
struct NewLink: Sendable {
    let id: [UInt8]
    let size: UInt64
    let expires: UInt64
    let views: Int
    let iterations: Int
    let claimHash: [UInt8]
    let deleteHash: [UInt8]
    let created: UInt64
    /// The HMAC of the client address (IPv6 by /64) that made it, for per-address quotas;
    /// nil for a link made by a signed request from a card the relay allows, which no
    /// per-address quota binds.
    let source: [UInt8]?
}

/// A stored link.
struct StoredLink: Sendable {
    let row: Int64
    let size: UInt64
    let expires: UInt64
    let views: Int
    let iterations: Int
    let claimHash: [UInt8]
    let deleteHash: [UInt8]
}
