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
    /// Stores a group record: new, or a higher version from the owner it was first stored
    /// for. The owner check, the version check and the per-owner count are made in the
    /// transaction that writes, so two owners racing for one id cannot both win. The owner
    /// accepts its own group; other members are invited until they accept.
    func put(group: StoredGroup, ownerCard: [UInt8], members: [[UInt8]], limits: GroupLimits, now: UInt64) async throws -> GroupPut
    /// The groups `member` is named in and accepted (Docs/RELAY.md, "Joining a group").
    func groups(member: [UInt8]) async throws -> [StoredGroup]
    /// Up to `limit` groups that name `member` and that it has neither accepted nor
    /// declined, oldest first.
    func invitations(member: [UInt8], limit: Int) async throws -> [Invitation]
    /// Records `member`'s answer to a group that names it, when the group's owner is
    /// `owner` (an acceptance names the owner it was meant for, so a squatter's record of
    /// the same id gets none).
    func answer(group: [UInt8], member: [UInt8], owner: [UInt8], accepted: Bool) async throws -> GroupAnswer
    /// Whether `key` is named in `group`'s record (accepted or not).
    func isNamed(_ key: [UInt8], in group: [UInt8]) async throws -> Bool
    /// Whether `key` is named in `group` and accepted it: a member, who may send and be served.
    func isMember(_ key: [UInt8], of group: [UInt8]) async throws -> Bool
    /// Whether `key` is a member (named and accepted) of any group.
    func isMember(_ key: [UInt8]) async throws -> Bool

    /// Whether `key` may own groups besides those the operator listed: it redeemed an invite.
    func isInvitedOwner(_ key: [UInt8]) async throws -> Bool
    /// Stores an invite (the SHA-256 of its token) good for `uses` owners until `expires`.
    func addInvite(hash: [UInt8], uses: Int, expires: UInt64, now: UInt64) async throws
    /// Spends one use of the invite whose token hashes to `hash` on `key`, which may then
    /// own groups; false when no such invite has a use left now. A key that already
    /// redeemed one spends nothing.
    func redeem(invite hash: [UInt8], for key: [UInt8], now: UInt64) async throws -> Bool

    /// The key the relay's processes share for HMACs of client addresses, made by `create`
    /// the first time: per-address link quotas are kept in the store, so every process
    /// counts an address alike, and the store holds no address in clear.
    func addressSecret(create: @Sendable () -> [UInt8]) async throws -> [UInt8]

    /// Starts storing a message: its row, not yet served, or the quota it would pass.
    /// Throws ``RelayStoreConflict`` when the message exists. Its bytes count against its
    /// group's, its group owner's and the relay's quotas from now until it is deleted.
    func begin(message: NewMessage, quotas: Quotas, now: UInt64) async throws -> MessageBegin
    /// Stores a message of at most one row (64 KiB) whole, as ``begin(message:quotas:now:)``,
    /// ``append(chunk:index:to:)`` and ``finish(message:)`` would, in one transaction.
    func storeWhole(message: NewMessage, bytes: [UInt8], quotas: Quotas, now: UInt64) async throws -> MessageBegin
    /// Appends the next chunk (at most 64 KiB) of a message being stored.
    func append(chunk: [UInt8], index: Int, to message: Int64) async throws
    /// Serves the message from now on, under the next cursor: cursors follow the order in
    /// which messages are finished, and are never reused.
    func finish(message: Int64) async throws
    /// Drops a message that was not finished.
    func abandon(message: Int64) async throws

    /// Up to `limit` messages for `recipient` after `cursor`, in cursor order: served,
    /// unexpired, not yet confirmed by it, in groups it is still a member of or in the guest
    /// box (in `group` only, when given).
    func messages(for recipient: [UInt8], in group: [UInt8]?, after cursor: Int64, limit: Int, now: UInt64) async throws -> [ListedMessage]
    /// Unexpired guest-box messages (Docs/RELAY.md, "The guest box") not yet confirmed by
    /// their recipient: sent by `sender`, or waiting for `recipient` (whichever is given).
    func guestMessages(from sender: [UInt8]?, to recipient: [UInt8]?, now: UInt64) async throws -> Int
    /// Whether `key` sent a guest-box message, or has one waiting, that has not expired: a
    /// guest, who may hold a waiting list for the answer.
    func isGuest(_ key: [UInt8], now: UInt64) async throws -> Bool
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

    /// Deletes expired messages, links, nonces and invites, and uploads abandoned before
    /// `staleBefore`, then counts the quotas' usage again from what is left (so a count that
    /// drifted, after a crash, is right again). Returns how many messages and links it
    /// deleted.
    func sweep(now: UInt64, staleBefore: UInt64) async throws -> Int
}

/// A group record as a relay keeps it.
struct StoredGroup: Sendable {
    let id: [UInt8]
    let version: UInt64
    /// The owner's Ed25519 key.
    let owner: [UInt8]
    let record: [UInt8]
}

/// What a relay allows each group owner (Docs/RELAY.md, "Operator policy").
struct GroupLimits: Sendable {
    /// Groups one owner may register here.
    let perOwner: Int
    /// A record's bytes count against its owner's quota and the total, as messages do.
    let quotas: Quotas
}

/// What storing a group record did.
enum GroupPut: Equatable, Sendable {
    case stored
    /// The relay has this version or a newer one.
    case stale
    /// Another owner registered the id first.
    case otherOwner
    /// The owner has as many groups here as it may.
    case tooManyGroups
    /// The record would pass its owner's quota or the relay's.
    case overQuota
}

/// A group that names a member who has not answered it yet.
struct Invitation: Sendable {
    let group: [UInt8]
    let version: UInt64
    /// The owner's whole card (§1 binary form), so a member can tell it from a trusted
    /// peer's without fetching the record.
    let ownerCard: [UInt8]
}

/// What a member's answer to a group did.
enum GroupAnswer: Equatable, Sendable {
    case recorded
    case unknownGroup
    /// The record does not name the member.
    case notNamed
    /// The group here has another owner than the one the member answered.
    case otherOwner
}

/// The quotas a message's bytes count against, in bytes.
struct Quotas: Sendable {
    /// Of one group's messages.
    let group: UInt64
    /// Of all the messages and records of one owner's groups.
    let owner: UInt64
    /// Of every message and record on the relay.
    let total: UInt64
}

/// What starting a message did.
enum MessageBegin: Equatable, Sendable {
    /// Its row.
    case started(Int64)
    /// It would pass the group's quota.
    case overGroupQuota
    /// It would pass its group owner's quota.
    case overOwnerQuota
    /// It would pass the relay's total quota.
    case overTotalQuota
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
