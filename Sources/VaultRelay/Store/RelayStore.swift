import Foundation

/// Where a relay keeps its identity, groups and messages: SQLite (``SQLiteRelayStore``,
/// the embedded default) or PostgreSQL, which several relay processes can share.
///
/// Every read that serves a message checks its expiry itself, so nothing past its time
/// to live is served between sweeps; every change is one transaction.
protocol RelayStore: LinkStore {
    /// Runs what the store needs in the background (a connection pool); returns only when
    /// cancelled or failed. The other methods are called while it runs.
    func run() async throws
    /// Makes the tables, if need be; called once, first, while ``run()`` runs.
    func prepare() async throws

    /// The relay's identity secret, made by `create` the first time (and kept by whichever
    /// process stored it first, when several share the store).
    func identitySecret(create: @Sendable () -> [UInt8]) async throws -> [UInt8]

    /// Records a request nonce until `expires`; false when it was already recorded.
    func remember(nonce: [UInt8], expires: UInt64) async throws -> Bool

    /// A group's stored record.
    func group(id: [UInt8]) async throws -> StoredGroup?
    /// Stores a group record (new, or a higher version from the same owner); false when
    /// a version as high or higher is stored.
    func put(group: StoredGroup, members: [[UInt8]]) async throws -> Bool
    /// The groups `member` belongs to.
    func groups(member: [UInt8]) async throws -> [StoredGroup]
    /// Whether `key` is a member of `group`.
    func isMember(_ key: [UInt8], of group: [UInt8]) async throws -> Bool
    /// Whether `key` is a member of any group.
    func isMember(_ key: [UInt8]) async throws -> Bool

    /// Starts storing a message: its row, not yet served. Nil when the group is over
    /// `quota` with it, and throws ``RelayStoreConflict`` when the message exists.
    func begin(message: NewMessage, quota: UInt64, now: UInt64) async throws -> Int64?
    /// Appends the next chunk (at most 64 KiB) of a message being stored.
    func append(chunk: [UInt8], index: Int, to message: Int64) async throws
    /// Serves the message from now on, under the next cursor: cursors follow the order in
    /// which messages are finished, and are never reused.
    func finish(message: Int64) async throws
    /// Drops a message that was not finished.
    func abandon(message: Int64) async throws

    /// Up to `limit` messages for `recipient` after `cursor`, in cursor order: served,
    /// unexpired, not yet confirmed by it, in groups it is still a member of.
    func messages(for recipient: [UInt8], after cursor: Int64, limit: Int, now: UInt64) async throws -> [ListedMessage]
    /// The message if `recipient` may read it now.
    func message(group: [UInt8], id: [UInt8], for recipient: [UInt8], now: UInt64) async throws -> ListedMessage?
    /// Chunk `index` of a message, nil past its last.
    func chunk(_ index: Int, of message: Int64) async throws -> [UInt8]?
    /// Records `recipient`'s confirmation; deletes the message's content when it asked for
    /// that and every recipient confirmed (its record stays, without content, until it
    /// expires, for ``receipts(group:id:sender:now:)``). False when the message is not there
    /// for it.
    func confirm(group: [UInt8], id: [UInt8], by recipient: [UInt8], now: UInt64) async throws -> Bool
    /// For `sender`'s own unexpired message: how many recipients it has, and how many
    /// confirmed it.
    func receipts(group: [UInt8], id: [UInt8], sender: [UInt8], now: UInt64) async throws -> (recipients: Int, confirmed: Int)?

    /// Deletes `sender`'s own message, content and record, whether stored whole or still
    /// arriving; false when it has none by that id.
    func delete(group: [UInt8], id: [UInt8], sender: [UInt8]) async throws -> Bool

    /// Deletes expired messages and nonces, and uploads abandoned before `staleBefore`.
    /// Returns how many messages it deleted.
    func sweep(now: UInt64, staleBefore: UInt64) async throws -> Int
}

/// A group record as a relay keeps it.
struct StoredGroup: Sendable {
    let id: [UInt8]
    let version: UInt64
    let owner: [UInt8]
    let record: [UInt8]
}

/// A message about to be stored.
struct NewMessage: Sendable {
    let group: [UInt8]
    let id: [UInt8]
    let sender: [UInt8]
    let size: UInt64
    let expires: UInt64
    let deleteWhenConfirmed: Bool
    let bodyHash: [UInt8]
    let recipients: [[UInt8]]
    let created: UInt64
}

/// A stored message, as listed and served.
struct ListedMessage: Sendable {
    let row: Int64
    /// Its place in the order messages were finished (`after`, `next` and `last` in the API).
    let cursor: Int64
    let group: [UInt8]
    let id: [UInt8]
    let size: UInt64
    let expires: UInt64
    let bodyHash: [UInt8]
}

/// The message is already stored.
struct RelayStoreConflict: Error {}
