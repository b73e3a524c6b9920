/// Where a relay keeps share links (Docs/LINKS.md, "Relay"): the same stores as messages,
/// with the same expiry rules. A link's row says how many views are left; a view is taken
/// by one atomic statement, so two claims of a link's last view cannot both succeed.
protocol LinkStore: Sendable {
    /// Starts storing a link: its row, not yet served. Nil when all links together would
    /// be over `quota` with it.
    func begin(link: NewLink, quota: UInt64, now: UInt64) async throws -> Int64?
    /// Appends the next chunk (at most 64 KiB) of a link being stored.
    func append(linkChunk: [UInt8], index: Int, to link: Int64) async throws
    /// Serves the link from now on.
    func finish(link: Int64) async throws
    /// Drops a link: one not finished, one deleted by its owner, or one whose last view was served.
    func delete(link: Int64) async throws

    /// The link if it is served, unexpired and has a view left.
    func link(id: [UInt8], now: UInt64) async throws -> StoredLink?
    /// Takes one view of the link, atomically: the views left after it, or nil when none
    /// was left (another claim took the last) or it expired.
    func takeView(link: Int64, now: UInt64) async throws -> Int?
    /// Chunk `index` of a link, nil past its last.
    func linkChunk(_ index: Int, of link: Int64) async throws -> [UInt8]?
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
