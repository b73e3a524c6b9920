import Foundation
import GRDB

/// What applying one change did (``Keystore/apply(_:record:content:itemKey:)``).
public enum ChangeOutcome: Equatable, Sendable {
    /// The change is now the item's current version (its content, or its deletion).
    case current
    /// The change lost to a version it had not seen: its content is kept as a conflict copy.
    case conflict
    /// A version that another known change supersedes, or that loses to a later delete: it
    /// is remembered, so that it never comes back, and changes nothing.
    case superseded
    /// This change was known already.
    case duplicate
}

/// Answers of ``Keystore/authorRefusal(_:keyID:)``, kept for one run: each reads the
/// keystore's peers and shares, and a message's many changes come from few authors.
public final class AuthorChecks {
    private let keystore: Keystore
    private var answers: [[UInt8]: String?] = [:]

    /// Checks against `keystore`.
    public init(_ keystore: Keystore) { self.keystore = keystore }

    /// The answer for `author` and `keyID` if it was asked already (outer nil: not asked).
    func known(_ author: KeyCard, keyID: [UInt8]) -> String?? { answers[author.encoded + keyID] }

    /// Why `author` may not change the items of `keyID`, or nil when it may.
    public func refusal(_ author: KeyCard, keyID: [UInt8]) throws(VaultError) -> String? {
        let key = author.encoded + keyID
        if let known = answers[key] { return known }
        let answer = try keystore.authorRefusal(author, keyID: keyID)
        answers[key] = answer
        return answer
    }
}

/// How a synced key's changes go out (`vault key sync`).
public struct SyncSettings: Sendable {
    /// The key.
    public let keyID: [UInt8]
    /// The group whose relays carry its changes.
    public let groupID: [UInt8]
    /// Seconds the relays keep each change.
    public let lifetime: UInt64
    /// Relays that must store a change for it to count as published.
    public let minimumRelays: Int

    init(row: Row) {
        keyID = [UInt8](row["key_id"] as Data)
        groupID = [UInt8](row["group_id"] as Data)
        lifetime = UInt64(row["lifetime"] as Int64)
        minimumRelays = row["min_relays"]
    }
}

/// One change in an item's history (`vault item history`).
public struct ItemHistoryEntry: Sendable {
    /// The signed change.
    public let change: ItemChange
    /// When this machine learnt of it.
    public let receivedAt: Date
    /// What it is now: current, a conflict copy, superseded, or (for a delete) the deletion.
    public let state: ChangeOutcome
}

/// A shared key's items kept alike on every holder's machine (Docs/RELAY.md, "Object
/// sync"). Each item's rows hold exactly its put heads (``ItemHeads``): the winner under
/// the item's id, each conflict copy under an id derived from the item's and its version,
/// and every change ever learnt is kept as signed, so that the set of changes, not the
/// order they came in, decides what an item is.
extension Keystore {
    /// How long the changes of a deleted item are kept before they are collected: past the
    /// longest time any relay keeps a message (7 days by default, at most what the relay
    /// operator sets), so an old change still on some relay finds its deletion here.
    public static let tombstoneRetention: UInt64 = 30 * 86_400

    /// The id under which the conflict copy of `item` at `version` is kept: the same on
    /// every holder's machine, so `vault item show ID` names one copy everywhere.
    public static func conflictID(item: [UInt8], version: ItemVersion) -> [UInt8] {
        var counter = ByteWriter()
        counter.u64(version.counter)
        return Sodium.blake2b(outputLength: 16, key: "vault/v1/conflict", item, counter.bytes, version.author)
    }

    /// The group a shared key's changes are published to, if it is synced.
    public func syncGroup(keyID: [UInt8]) throws(VaultError) -> [UInt8]? {
        try syncSettings(keyID: keyID)?.groupID
    }

    /// How a synced key's changes are published.
    public func syncSettings(keyID: [UInt8]) throws(VaultError) -> SyncSettings? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM key_sync WHERE key_id = ?", arguments: [Data(keyID)]).map(SyncSettings.init(row:))
        }
    }

    /// Every synced key's settings.
    public func syncedKeys() throws(VaultError) -> [SyncSettings] {
        try read { db in try Row.fetchAll(db, sql: "SELECT * FROM key_sync ORDER BY since").map(SyncSettings.init(row:)) }
    }

    /// Whether `card` holds a share of key `keyID`, by the holder tags of the key's bundles
    /// held here.
    public func isHolder(_ card: KeyCard, keyID: [UInt8]) throws(VaultError) -> Bool {
        Self.holds(card, try keyShares(keyID))
    }

    /// The shares of key `keyID` held here.
    private func keyShares(_ keyID: [UInt8]) throws(VaultError) -> [StoredSecret] {
        try secrets().filter { $0.header.keyID == keyID }
    }

    /// Whether one of `shares` (of one key) names `card`'s X25519 key among its holders.
    private static func holds(_ card: KeyCard, _ shares: [StoredSecret]) -> Bool {
        shares.contains { $0.header.index(of: card.agreementKey) != nil }
    }

    /// Every change known for items of `keyID` (for a snapshot), newest first.
    public func knownChanges(keyID: [UInt8]) throws(VaultError) -> [(change: ItemChange, record: [UInt8])] {
        try read { db in
            try Data.fetchAll(db, sql: "SELECT record FROM item_change WHERE key_id = ?", arguments: [Data(keyID)]).map { data in
                let record = [UInt8](data)
                return (try ItemChange(stored: record), record)
            }.sorted { $0.change.version > $1.change.version }
        }
    }

    /// Why `author` may not change the items of `keyID`, or nil when it may. It must be this
    /// identity or a trusted peer, by its whole card (a card made of one holder's X25519 key
    /// and someone else's Ed25519 key is not that holder), and a holder of the key: the
    /// key's share bundles name every holder by a tag of its X25519 key.
    public func authorRefusal(_ author: KeyCard, keyID: [UInt8]) throws(VaultError) -> String? {
        let me = try identityInfo().card, peers = try peers()
        guard me == author || peers.contains(where: { $0.card == author }) else { return "its author is not you nor a trusted peer" }
        let shares = try keyShares(keyID)
        guard !shares.isEmpty else { return "you hold no share of its key" }
        guard Self.holds(author, shares) else { return "its author does not hold its key" }
        return nil
    }

    /// Applies a change that someone published: `record` is its signed record, already
    /// read by ``ItemChange/init(record:)``; `content` opens a put's content (the item's
    /// export), read only when the change is kept. The author must be allowed
    /// (``authorRefusal(_:keyID:)``), the export must be the one the record hashes and name
    /// the same item and key, and with `itemKey` (the key unlocked) its stream must open.
    /// All of it is one transaction: a change is applied whole or not at all.
    /// `authors` keeps the author checks of a run (a message's changes come from few authors).
    @discardableResult
    public func apply<Content: ByteSource>(_ change: ItemChange, record: [UInt8], content: (() throws -> Content)?,
                                           itemKey: (ItemHeader) throws -> SecureBytes?, authors: AuthorChecks? = nil) throws -> ChangeOutcome {
        if let refusal = try (authors ?? AuthorChecks(self)).refusal(change.author, keyID: change.keyID) {
            throw VaultError.malformed(what: "the item change", detail: refusal)
        }
        return try Self.storage(on: home.directory) {
            try database.write { db in try applyChange(change, record: record, content: content, itemKey: itemKey, db) }
        }
    }

    /// ``apply(_:record:content:itemKey:authors:)`` in the caller's transaction, once its
    /// author is allowed.
    func applyChange<Content: ByteSource>(_ change: ItemChange, record: [UInt8], content: (() throws -> Content)?,
                                          itemKey: (ItemHeader) throws -> SecureBytes?, _ db: Database) throws -> ChangeOutcome {
        let known = try entries(item: change.itemID, db)
        if let same = known.first(where: { $0.entry.version == change.version }) {
            // An author never signs two changes with one version: two records
            // under one version mean its key signed something it should not have.
            guard same.record == record else {
                throw VaultError.malformed(what: "the item change", detail: "its author signed another change with the same version")
            }
            return .duplicate
        }
        guard known.allSatisfy({ $0.keyID == change.keyID }) else {
            throw VaultError.malformed(what: "the item change", detail: "its item belongs to another key")
        }
        let heads = try materialize(item: change.itemID, known: known.map(\.entry),
                                    adding: ItemHeads.Entry(change), db) { rowID in
            // A put sent without its content must be superseded by what came before it.
            guard let content else { throw VaultError.malformed(what: "the item change", detail: "its content was not sent") }
            try storeContent(of: change, from: content(), rowID: rowID, itemKey: itemKey, db)
        }
        try insert(change, record: record, published: true, db)
        try recordAppEvents(item: change.itemID, before: ItemHeads(known.map(\.entry)), after: heads, local: false, db)
        return Self.outcome(of: change.version, in: heads)
    }

    /// Makes a change by `author` to an item of synced `keyID`, superseding `supersedes`
    /// (what the author saw as current), in the caller's transaction: `store` writes a put's
    /// content under the row id it is given (the item's id: a local change counts past every
    /// version known, so it is current), then the change is signed over the content as
    /// stored, and kept to be published.
    @discardableResult
    func authorChange(_ operation: ItemChange.Operation, item itemID: [UInt8], keyID: [UInt8], supersedes: [ItemVersion],
                      author: Identity, _ db: Database, store: ([UInt8], ItemVersion) throws -> StoredItem?) throws -> ItemChange {
        precondition(supersedes.count <= ItemChange.maximumSuperseded)
        let known = try entries(item: itemID, db)
        let clock = UInt64(try Int64.fetchOne(db, sql: "SELECT counter FROM item_clock WHERE key_id = ?", arguments: [Data(keyID)]) ?? 0)
        guard clock < ItemChange.maximumCounter else {
            throw VaultError.invalidSecret("the key's version counter is used up (a holder signed a change numbered \(clock)): make a new key")
        }
        let version = ItemVersion(counter: clock + 1, author: author.card.signingKey)
        var stored: StoredItem?
        let before = known.map(\.entry)
        let after = try materialize(item: itemID, known: before,
                                    adding: ItemHeads.Entry(version: version, operation: operation, supersedes: supersedes), db) { rowID in
            stored = try store(rowID, version)
        }
        try recordAppEvents(item: itemID, before: ItemHeads(before), after: after, local: true, db)
        var length: UInt64 = 0
        let hasher = SHA256Hasher()
        if operation == .put {
            guard let stored else { preconditionFailure("a local put is always current") }
            try exportItem(stored, db) { bytes in
                hasher.update(bytes)
                length += UInt64(bytes.count)
            }
        }
        let change = ItemChange(keyID: keyID, itemID: itemID, counter: version.counter, author: author.card, operation: operation,
                                createdAt: VaultClock.seconds(), supersedes: supersedes, contentLength: length,
                                contentHash: operation == .put ? hasher.finish() : [UInt8](repeating: 0, count: 32))
        try insert(change, record: change.signed(by: author), published: false, db)
        return change
    }

    /// Every change known for `itemID`, oldest first, with its state.
    public func history(item itemID: [UInt8]) throws(VaultError) -> [ItemHistoryEntry] {
        try read { db in
            let known = try changes(item: itemID, db)
            let heads = ItemHeads(known.map { ItemHeads.Entry($0.change) })
            return known.map { ItemHistoryEntry(change: $0.change, receivedAt: $0.receivedAt, state: Self.outcome(of: $0.change.version, in: heads)) }
                .sorted { $0.change.version < $1.change.version }
        }
    }

    /// The item ids of `keyID` whose changes are known, and what they resolve to.
    public func resolved(keyID: [UInt8]) throws(VaultError) -> [(item: [UInt8], heads: ItemHeads)] {
        try read { db in
            let ids = try Data.fetchAll(db, sql: "SELECT DISTINCT item_id FROM item_change WHERE key_id = ? ORDER BY item_id",
                                        arguments: [Data(keyID)])
            return try ids.map { id in
                ([UInt8](id), ItemHeads(try entries(item: [UInt8](id), db).map(\.entry)))
            }
        }
    }

    /// Changes made here and not yet stored on enough relays: their records, oldest first.
    public func unpublishedChanges(keyID: [UInt8]) throws(VaultError) -> [ItemChange] {
        try read { db in
            try Data.fetchAll(db, sql: "SELECT record FROM item_change WHERE key_id = ? AND published = 0 ORDER BY counter",
                              arguments: [Data(keyID)]).map { try ItemChange(stored: [UInt8]($0)) }
        }
    }

    /// Marks a change as stored on enough relays.
    public func markPublished(_ change: ItemChange) throws(VaultError) {
        try markPublished([change])
    }

    /// Marks changes as stored on enough relays, in one transaction (one sync's worth).
    public func markPublished(_ changes: [ItemChange]) throws(VaultError) {
        try write { db in
            for change in changes {
                try db.execute(sql: "UPDATE item_change SET published = 1 WHERE item_id = ? AND counter = ? AND author = ?",
                               arguments: [Data(change.itemID), Int64(change.version.counter), Data(change.version.author)])
            }
        }
    }

    /// The signed record of a known change.
    public func record(of change: ItemChange) throws(VaultError) -> [UInt8]? {
        try read { db in
            try Data.fetchOne(db, sql: "SELECT record FROM item_change WHERE item_id = ? AND counter = ? AND author = ?",
                              arguments: [Data(change.itemID), Int64(change.version.counter), Data(change.version.author)])
                .map { [UInt8]($0) }
        }
    }

    /// Collects the history of items of `keyID` that are deleted (every head a delete) and
    /// whose newest change came more than ``tombstoneRetention`` before `now`: the changes
    /// the deletes superseded go; the deletes themselves (a few hundred bytes each) stay, so
    /// a put made beside a delete and delivered late still loses to it, or is kept as a
    /// conflict copy, as on a machine that collected nothing. Returns how many items'
    /// histories were collected.
    @discardableResult
    public func collectTombstones(keyID: [UInt8], now: Date = VaultClock.now()) throws(VaultError) -> Int {
        let cutoff = Int64(now.timeIntervalSince1970) - Int64(Self.tombstoneRetention)
        return try write { db in
            var collected = 0
            let ids = try Data.fetchAll(db, sql: """
                SELECT item_id FROM item_change WHERE key_id = ? GROUP BY item_id HAVING max(received_at) < ? AND count(*) > 1
                """, arguments: [Data(keyID), cutoff])
            for id in ids {
                let heads = try heads(item: [UInt8](id), db)
                guard heads.keptPuts.isEmpty else { continue }
                let kept = Set(heads.heads.map(\.version))
                for change in try changes(item: [UInt8](id), db).map(\.change) where !kept.contains(change.version) {
                    try db.execute(sql: "DELETE FROM item_change WHERE item_id = ? AND counter = ? AND author = ?",
                                   arguments: [id, Int64(change.version.counter), Data(change.version.author)])
                }
                collected += 1
            }
            return collected
        }
    }

    /// Checks an item stored unopened (received while its key was locked) now that its item
    /// key is at hand: its stream must open, and its payload agree with its header (as far as
    /// a password layer lets that be seen). Marks it opened; throws when it does not open.
    public func checkUnopened(_ item: StoredItem, itemKey: SecureBytes) throws {
        if let failure = try checkUnopened([(item, itemKey)]).first { throw failure.error }
    }

    /// Checks several unopened items (``checkUnopened(_:itemKey:)``) in one transaction, one
    /// savepoint each: those that open are marked opened; returns those that do not, with
    /// why. A failure of this machine (its disk) is thrown, and nothing is marked.
    public func checkUnopened(_ items: [(item: StoredItem, itemKey: SecureBytes)]) throws -> [(item: StoredItem, error: Error)] {
        try Self.storage(on: home.directory) {
            try database.write { db in
                var failures: [(item: StoredItem, error: Error)] = []
                for (item, itemKey) in items {
                    do {
                        try db.inSavepoint {
                            let check = ImportCheck(item.header)
                            try openStoredStream(item.id, itemKey: itemKey, db, emit: check.write)
                            do { try check.finish() } catch { throw Self.openingFailure(error) }
                            try db.execute(sql: "UPDATE item SET unopened = 0, size = ? WHERE id = ?", arguments: [Int64(check.size), Data(item.id)])
                            return .commit
                        }
                    } catch let error as DatabaseError {
                        throw error
                    } catch {
                        failures.append((item, error))
                    }
                }
                return failures
            }
        }
    }

    // MARK: - Inside a transaction

    /// What the changes known for `itemID` make of it.
    func heads(item itemID: [UInt8], _ db: Database) throws -> ItemHeads {
        ItemHeads(try entries(item: itemID, db).map(\.entry))
    }

    /// A known change as far as ordering needs it, with its key and its record as stored.
    private struct KnownEntry {
        let entry: ItemHeads.Entry
        let keyID: [UInt8]
        let record: [UInt8]
    }

    /// The changes known for `itemID`, read for ordering only: from the columns and the
    /// superseded list of each stored record, not parsed whole. Every change to an item reads
    /// its whole history, and a full parse checks the author's card's curve points (some 50 µs
    /// a record): a hundred edits made a write take milliseconds.
    private func entries(item itemID: [UInt8], _ db: Database) throws -> [KnownEntry] {
        try Row.fetchAll(db, sql: "SELECT counter, author, key_id, operation, record FROM item_change WHERE item_id = ?",
                         arguments: [Data(itemID)]).map { row in
            let record = [UInt8](row[4] as Data)
            guard let operation = ItemChange.Operation(rawValue: UInt8(row[3] as Int)),
                  let supersedes = ItemChange.storedSupersedes(record) else {
                throw VaultError.keystoreCorrupt("a stored item change does not parse")
            }
            let version = ItemVersion(counter: UInt64(row[0] as Int64), author: [UInt8](row[1] as Data))
            return KnownEntry(entry: ItemHeads.Entry(version: version, operation: operation, supersedes: supersedes),
                              keyID: [UInt8](row[2] as Data), record: record)
        }
    }

    private struct KnownChange {
        let change: ItemChange
        let record: [UInt8]
        let receivedAt: Date
    }

    private func changes(item itemID: [UInt8], _ db: Database) throws -> [KnownChange] {
        try Row.fetchAll(db, sql: "SELECT record, received_at FROM item_change WHERE item_id = ?", arguments: [Data(itemID)]).map { row in
            let record = [UInt8](row[0] as Data)
            return KnownChange(change: try ItemChange(stored: record), record: record,
                               receivedAt: Date(timeIntervalSince1970: TimeInterval(row[1] as Int64)))
        }
    }

    private func insert(_ change: ItemChange, record: [UInt8], published: Bool, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO item_change (item_id, counter, author, key_id, operation, record, received_at, published)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [Data(change.itemID), Int64(change.version.counter), Data(change.version.author), Data(change.keyID),
                        Int(change.operation.rawValue), Data(record), Int64(VaultClock.now().timeIntervalSince1970), published ? 1 : 0])
        // The clock counts past every version seen, so this machine's next change is later
        // than all of them (Lamport).
        try db.execute(sql: """
            INSERT INTO item_clock (key_id, counter) VALUES (?, ?)
            ON CONFLICT (key_id) DO UPDATE SET counter = max(counter, excluded.counter)
            """, arguments: [Data(change.keyID), Int64(change.version.counter)])
    }

    /// Moves the item's rows so that they hold exactly the put heads once `entry` joins
    /// `known`: a put no longer a head loses its row, the winner's row takes the item's id,
    /// a conflict copy's row its own id; `store` writes `entry`'s content under the id it
    /// is given, when `entry` is a kept put. Returns the new heads.
    private func materialize(item itemID: [UInt8], known: [ItemHeads.Entry], adding entry: ItemHeads.Entry, _ db: Database,
                             store: ([UInt8]) throws -> Void) throws -> ItemHeads {
        let before = ItemHeads(known)
        let after = ItemHeads(known + [entry])
        func rowID(_ version: ItemVersion, _ heads: ItemHeads) -> [UInt8] {
            version == heads.winner?.version ? itemID : Self.conflictID(item: itemID, version: version)
        }
        try db.execute(sql: "PRAGMA defer_foreign_keys = ON")
        let kept = Set(after.keptPuts.map(\.version))
        var moves: [(from: [UInt8], to: [UInt8])] = []
        for put in before.keptPuts {
            let old = rowID(put.version, before)
            if !kept.contains(put.version) {
                try db.execute(sql: "DELETE FROM item WHERE id = ?", arguments: [Data(old)])
            } else if rowID(put.version, after) != old {
                moves.append((old, rowID(put.version, after)))
            }
        }
        // Two rows may trade ids (the winner becomes a conflict copy and a copy the
        // winner): each goes to a free id first.
        let parked = moves.map { ($0, SecureRandom().bytes(16)) }
        for (move, temporary) in parked { try moveItemRow(move.from, to: temporary, db) }
        for (move, temporary) in parked { try moveItemRow(temporary, to: move.to, db) }
        if entry.operation == .put, kept.contains(entry.version) {
            let id = rowID(entry.version, after)
            guard try Int.fetchOne(db, sql: "SELECT count(*) FROM item WHERE id = ?", arguments: [Data(id)]) == 0 else {
                throw VaultError.malformed(what: "the item change", detail: "an item that is not synced has its id")
            }
            try store(id)
        }
        return after
    }

    func moveItemRow(_ from: [UInt8], to: [UInt8], _ db: Database) throws {
        try db.execute(sql: "UPDATE item SET id = ? WHERE id = ?", arguments: [Data(to), Data(from)])
        try db.execute(sql: "UPDATE item_chunk SET item_id = ? WHERE item_id = ?", arguments: [Data(to), Data(from)])
    }

    /// Stores a put's content under `rowID`, checking it as it streams: the export's
    /// header names the change's item and key, the bytes are exactly the ones the record
    /// hashes, and, with the key unlocked, the stream opens.
    private func storeContent(of change: ItemChange, from source: some ByteSource, rowID: [UInt8],
                              itemKey: (ItemHeader) throws -> SecureBytes?, _ db: Database) throws {
        var hashed = HashingSource(BoundedSource(source, length: change.contentLength))
        let (header, streamLength) = try ItemExport.parsePrefix { try hashed.readFully($0) }
        guard header.itemID == change.itemID, header.keyID == change.keyID else {
            throw VaultError.malformed(what: "the item change", detail: "its content is another item")
        }
        _ = try storeItem(header, streamLength: streamLength, from: &hashed, key: try itemKey(header), markNew: true, db,
                          id: rowID, version: change.version)
        guard hashed.count == change.contentLength, Sodium.equal(hashed.finish(), change.contentHash) else {
            throw VaultError.corruptSecret("the item change's content is not the one its author signed")
        }
    }

    private static func outcome(of version: ItemVersion, in heads: ItemHeads) -> ChangeOutcome {
        if version == heads.winner?.version { return .current }
        return heads.conflicts.contains { $0.version == version } ? .conflict : .superseded
    }
}

/// A source that hashes (SHA-256) and counts what is read through it.
struct HashingSource<Base: ByteSource>: ByteSource {
    private var base: Base
    private let hasher = SHA256Hasher()
    /// Bytes read so far.
    private(set) var count: UInt64 = 0

    init(_ base: Base) { self.base = base }

    mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let got = try base.read(into: buffer)
        hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<got]))
        count += UInt64(got)
        return got
    }

    func finish() -> [UInt8] { hasher.finish() }
}
