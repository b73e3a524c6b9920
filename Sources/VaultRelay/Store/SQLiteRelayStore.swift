import Foundation
import GRDB
import VaultCore

/// The embedded store: one SQLite file (GRDB), made at mode 0600.
///
/// `secure_delete` is on, so SQLite overwrites what it deletes in the database file
/// instead of leaving it in free pages. The write-ahead log can still hold a deleted
/// message's pages until it is checkpointed: every sweep ends with a TRUNCATE checkpoint,
/// so they are gone from the log by the next sweep too (Docs/RELAY.md, "What a TTL
/// promises").
final class SQLiteRelayStore: RelayStore {
    let pool: DatabasePool
    /// The request nonces, in a file of their own (`path` + `.nonces`).
    let nonces: SQLiteNonces

    convenience init(path: String) throws {
        do {
            try self.init(opening: path)
        } catch let error as DatabaseError {
            // SQLite says only "unable to open database file" of a directory in the file's place.
            var info = stat()
            let reason = stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR ? "it is a directory"
                : error.message ?? "SQLite error \(error.resultCode.rawValue)"
            throw RelayStartFailure("cannot open the store \(path): \(reason)")
        }
    }

    private init(opening path: String) throws {
        try Self.createPrivately(path)
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
            // In WAL mode, NORMAL syncs at checkpoints, not at every commit: a commit no
            // longer waits for the disk (a relay makes several for each request), and a power
            // cut can lose the last commits, never corrupt the file (Docs/RELAY.md, "SQLite").
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        pool = try DatabasePool(path: path, configuration: configuration)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-relay") { db in
            try db.execute(sql: """
                CREATE TABLE relay_identity (id INTEGER PRIMARY KEY CHECK (id = 1), secret BLOB NOT NULL);
                CREATE TABLE nonces (nonce BLOB PRIMARY KEY, expires INTEGER NOT NULL);
                CREATE TABLE groups (id BLOB PRIMARY KEY, version INTEGER NOT NULL, owner BLOB NOT NULL, record BLOB NOT NULL);
                CREATE TABLE members (group_id BLOB NOT NULL REFERENCES groups(id) ON DELETE CASCADE, signing_key BLOB NOT NULL,
                                      PRIMARY KEY (group_id, signing_key));
                CREATE INDEX members_by_key ON members(signing_key);
                CREATE TABLE messages (row INTEGER PRIMARY KEY AUTOINCREMENT, group_id BLOB NOT NULL, id BLOB NOT NULL,
                                       sender BLOB NOT NULL, size INTEGER NOT NULL, expires INTEGER NOT NULL,
                                       delete_when_confirmed INTEGER NOT NULL, body_hash BLOB NOT NULL,
                                       ready INTEGER NOT NULL DEFAULT 0, -- 0 storing, 1 served, 2 content deleted on confirmation
                                       created INTEGER NOT NULL, UNIQUE (group_id, id));
                CREATE INDEX messages_by_expiry ON messages(expires);
                CREATE TABLE recipients (message INTEGER NOT NULL REFERENCES messages(row) ON DELETE CASCADE,
                                         signing_key BLOB NOT NULL, confirmed INTEGER NOT NULL DEFAULT 0,
                                         PRIMARY KEY (message, signing_key));
                CREATE INDEX recipients_by_key ON recipients(signing_key, confirmed);
                CREATE TABLE chunks (message INTEGER NOT NULL REFERENCES messages(row) ON DELETE CASCADE, n INTEGER NOT NULL,
                                     bytes BLOB NOT NULL, PRIMARY KEY (message, n));
                """)
        }
        migrator.registerMigration("v2-links", migrate: Self.createLinkTables)
        // Cursors follow the order messages were finished, not the order their uploads began
        // (a large share begun first and finished last would otherwise be listed behind a
        // cursor a client has already passed). The counter only grows, so a cursor is never
        // reused once its message is gone; it starts past every row number, which were the
        // cursors before.
        migrator.registerMigration("v3-cursors") { db in
            try db.execute(sql: """
                ALTER TABLE messages ADD COLUMN finished INTEGER;
                UPDATE messages SET finished = row WHERE ready > 0;
                CREATE TABLE message_cursor (id INTEGER PRIMARY KEY CHECK (id = 1), last INTEGER NOT NULL);
                INSERT INTO message_cursor (id, last) VALUES (1, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'messages'), 0));
                """)
        }
        migrator.registerMigration("v4-open-internet", migrate: Self.openInternet)
        try migrator.migrate(pool)
        nonces = try SQLiteNonces(path: path + ".nonces", ownedLike: path)
        // The nonces a relay from before the nonce file wrote to `v1-relay`'s table are kept
        // in the file too, at every start, so a restart onto this version still refuses the
        // requests they name. The table is left in place, and emptied only by the sweep as
        // its nonces expire: an older relay still running on this file (during an upgrade,
        // while `vault relay invite` of the new version opens it) or started on it again (a
        // rollback) goes on writing and reading it.
        try nonces.adopt(try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT nonce, expires FROM nonces").map { (nonce: $0[0] as Data, expires: $0[1] as Int64) }
        })
    }

    /// Makes `path` at mode 0600 when it does not exist (one that exists keeps its mode),
    /// owned as `like` is when given and it exists: a new file made by root beside a store
    /// the relay's own user owns (`vault relay invite` run as root after an upgrade) must
    /// still open for that user.
    static func createPrivately(_ path: String, ownedLike like: String? = nil) throws {
        let fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            // Made meanwhile by another process starting on the same store: as good.
            if errno == EEXIST { return }
            throw RelayStartFailure("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var owner = stat()
        if let like, stat(like, &owner) == 0, owner.st_uid != geteuid() || owner.st_gid != getegid() {
            guard fchown(fd, owner.st_uid, owner.st_gid) == 0 else {
                let reason = String(cString: strerror(errno))
                unlink(path)
                throw RelayStartFailure("cannot give \(path) the owner of \(like): \(reason)")
            }
        }
    }

    /// Issue 37: members opt in to groups; operator policy (invited owners) and quotas kept
    /// as running counts; links' claim allowance and source in the store.
    private static func openInternet(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE acceptances (group_id BLOB NOT NULL REFERENCES groups(id) ON DELETE CASCADE, signing_key BLOB NOT NULL,
                                      accepted INTEGER NOT NULL, PRIMARY KEY (group_id, signing_key));
            -- Members from before opt-in keep being served: they were taken without asking,
            -- and their owners are theirs to judge.
            INSERT INTO acceptances (group_id, signing_key, accepted) SELECT group_id, signing_key, 1 FROM members;
            CREATE TABLE invites (hash BLOB PRIMARY KEY, uses INTEGER NOT NULL, expires INTEGER NOT NULL, created INTEGER NOT NULL);
            CREATE TABLE invited_owners (signing_key BLOB PRIMARY KEY, invited INTEGER NOT NULL);
            CREATE TABLE usage (scope BLOB PRIMARY KEY, bytes INTEGER NOT NULL);
            CREATE TABLE address_secret (id INTEGER PRIMARY KEY CHECK (id = 1), secret BLOB NOT NULL);
            ALTER TABLE links ADD COLUMN attempts_full INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE links ADD COLUMN source BLOB;
            CREATE INDEX links_by_source ON links(source);
            CREATE INDEX groups_by_owner ON groups(owner);
            ALTER TABLE groups ADD COLUMN owner_card BLOB;
            """)
        // Invitations name the owner by its whole card, which the records hold.
        for row in try Row.fetchAll(db, sql: "SELECT id, record FROM groups") {
            guard let record = try? GroupRecord(parsing: bytes(row, 1)) else { continue }
            try db.execute(sql: "UPDATE groups SET owner_card = ? WHERE id = ?", arguments: [Data(record.owner.encoded), row[0] as Data])
        }
        try recount(db)
    }

    /// Runs `value`, which reads with one statement. SQLite runs a statement on one
    /// snapshot, so it needs no transaction of its own; GRDB's `read` would add two
    /// statements (BEGIN and COMMIT) to every request. Statements here are cached
    /// (`cachedStatement`): preparing them again took a tenth of the relay's CPU time.
    func read<T: Sendable>(_ value: @Sendable (Database) throws -> T) async throws -> T {
        try await pool.unsafeRead(value)
    }

    /// Nothing runs in the background.
    func run() async throws {
        while true { try await Task.sleep(for: .seconds(86_400)) }
    }

    /// The tables were made as the file opened.
    func prepare() async throws {}

    func identitySecret(create: @Sendable () -> [UInt8]) async throws -> [UInt8] {
        try await secret(in: "relay_identity", create: create)
    }

    /// The secret of a one-row table (`id = 1`), made by `create` the first time.
    func secret(in table: String, create: @Sendable () -> [UInt8]) async throws -> [UInt8] {
        try await pool.write { db in
            if let secret = try Data.fetchOne(db, sql: "SELECT secret FROM \(table) WHERE id = 1") { return [UInt8](secret) }
            let secret = create()
            try db.execute(sql: "INSERT INTO \(table) (id, secret) VALUES (1, ?)", arguments: [Data(secret)])
            return secret
        }
    }

    func remember(nonce: [UInt8], expires: UInt64) async throws -> Bool {
        try await nonces.remember(nonce, expires: expires)
    }

    func begin(message: NewMessage, quotas: Quotas, now: UInt64) async throws -> MessageBegin {
        try await pool.write { db in try Self.begin(db, message, quotas: quotas, now: now) }
    }

    func storeWhole(message: NewMessage, bytes: [UInt8], quotas: Quotas, now: UInt64) async throws -> MessageBegin {
        try await pool.write { db in
            let outcome = try Self.begin(db, message, quotas: quotas, now: now)
            guard case .started(let row) = outcome else { return outcome }
            if !bytes.isEmpty {
                try db.cachedStatement(sql: "INSERT INTO chunks (message, n, bytes) VALUES (?, 0, ?)").execute(arguments: [row, Data(bytes)])
            }
            try Self.finish(db, row)
            return outcome
        }
    }

    /// One writer at a time: the checks and the counts they read cannot interleave.
    private static func begin(_ db: Database, _ message: NewMessage, quotas: Quotas, now: UInt64) throws -> MessageBegin {
        let owner = try owner(db, message.group)
        if try used(db, message.group) + message.size > quotas.group { return .overGroupQuota }
        if try !owner.isEmpty && used(db, owner) + message.size > quotas.owner { return .overOwnerQuota }
        if try used(db, []) + message.size > quotas.total { return .overTotalQuota }
        do {
            try db.cachedStatement(sql: """
                INSERT INTO messages (group_id, id, sender, size, expires, delete_when_confirmed, body_hash, created)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """).execute(arguments: [Data(message.group), Data(message.id), Data(message.sender), Int64(message.size),
                                 Int64(message.expires), message.deleteWhenConfirmed, Data(message.bodyHash), Int64(message.created)])
        } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
            throw RelayStoreConflict()
        }
        let row = db.lastInsertedRowID
        for recipient in message.recipients {
            try db.cachedStatement(sql: "INSERT INTO recipients (message, signing_key) VALUES (?, ?)").execute(arguments: [row, Data(recipient)])
        }
        try count(db, Int64(message.size), in: scopes(message.group, owner: owner))
        return .started(row)
    }

    func append(chunk: [UInt8], index: Int, to message: Int64) async throws {
        try await pool.write { db in
            try db.cachedStatement(sql: "INSERT INTO chunks (message, n, bytes) VALUES (?, ?, ?)").execute(arguments: [message, index, Data(chunk)])
        }
    }

    /// One writer at a time: cursors are handed out in the order the messages become visible.
    func finish(message: Int64) async throws {
        try await pool.write { db in try Self.finish(db, message) }
    }

    private static func finish(_ db: Database, _ message: Int64) throws {
        try db.cachedStatement(sql: "UPDATE message_cursor SET last = last + 1 WHERE id = 1").execute()
        try db.cachedStatement(sql: "UPDATE messages SET ready = 1, finished = (SELECT last FROM message_cursor WHERE id = 1) WHERE row = ?")
            .execute(arguments: [message])
    }

    func abandon(message: Int64) async throws {
        _ = try await pool.write { db in try Self.deleteMessages(db, "row = ?", [message]) }
    }

    func messages(for recipient: [UInt8], in group: [UInt8]?, after cursor: Int64, limit: Int, now: UInt64) async throws -> [ListedMessage] {
        try await read { db in
            try Row.fetchAll(db.cachedStatement(sql: """
                SELECT m.row, m.finished, m.group_id, m.id, m.size, m.expires, m.body_hash FROM messages m
                JOIN recipients r ON r.message = m.row
                \(Self.memberJoin)
                WHERE r.signing_key = ? AND r.confirmed = 0 AND m.ready = 1 AND m.expires > ? AND m.finished > ? AND \(Self.memberFound)
                  AND (? IS NULL OR m.group_id = ?)
                ORDER BY m.finished LIMIT ?
                """), arguments: [Data(recipient), Int64(now), cursor, group.map { Data($0) }, group.map { Data($0) }, limit]).map(Self.listed)
        }
    }

    func message(group: [UInt8], id: [UInt8], for recipient: [UInt8], now: UInt64) async throws -> ListedMessage? {
        try await read { db in
            try Row.fetchOne(db.cachedStatement(sql: """
                SELECT m.row, COALESCE(m.finished, 0), m.group_id, m.id, m.size, m.expires, m.body_hash FROM messages m
                JOIN recipients r ON r.message = m.row
                \(Self.memberJoin)
                WHERE m.group_id = ? AND m.id = ? AND r.signing_key = ? AND m.ready = 1 AND m.expires > ? AND \(Self.memberFound)
                """), arguments: [Data(group), Data(id), Data(recipient), Int64(now)]).map(Self.listed)
        }
    }

    func guestMessages(from sender: [UInt8]?, to recipient: [UInt8]?, now: UInt64) async throws -> Int {
        try await read { db in
            try Int.fetchOne(db.cachedStatement(sql: """
                SELECT COUNT(DISTINCT m.row) FROM messages m JOIN recipients r ON r.message = m.row
                WHERE m.group_id = \(Self.guestBox) AND r.confirmed = 0 AND m.expires > ?
                  AND (? IS NULL OR m.sender = ?) AND (? IS NULL OR r.signing_key = ?)
                """), arguments: [Int64(now), sender.map { Data($0) }, sender.map { Data($0) }, recipient.map { Data($0) },
                                 recipient.map { Data($0) }]) ?? 0
        }
    }

    func isGuest(_ key: [UInt8], now: UInt64) async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(db.cachedStatement(sql: """
                SELECT EXISTS (SELECT 1 FROM messages m WHERE m.group_id = \(Self.guestBox) AND m.sender = ? AND m.expires > ?)
                    OR EXISTS (SELECT 1 FROM messages m JOIN recipients r ON r.message = m.row
                               WHERE m.group_id = \(Self.guestBox) AND r.signing_key = ? AND m.expires > ?)
                """), arguments: [Data(key), Int64(now), Data(key), Int64(now)]) ?? false
        }
    }

    func chunk(_ index: Int, of message: Int64) async throws -> [UInt8]? {
        try await read { db in
            try Data.fetchOne(db.cachedStatement(sql: "SELECT bytes FROM chunks WHERE message = ? AND n = ?"),
                arguments: [message, index]).map { [UInt8]($0) }
        }
    }

    func confirm(group: [UInt8], id: [UInt8], by recipient: [UInt8], now: UInt64) async throws -> Bool {
        try await pool.write { db in
            guard let row = try Row.fetchOne(db.cachedStatement(sql: """
                SELECT m.row, m.delete_when_confirmed, m.size, m.group_id FROM messages m
                JOIN recipients r ON r.message = m.row
                \(Self.memberJoin)
                WHERE m.group_id = ? AND m.id = ? AND r.signing_key = ? AND m.ready = 1 AND m.expires > ? AND \(Self.memberFound)
                """), arguments: [Data(group), Data(id), Data(recipient), Int64(now)]) else { return false }
            let message: Int64 = row[0]
            try db.cachedStatement(sql: "UPDATE recipients SET confirmed = 1 WHERE message = ? AND signing_key = ?")
                .execute(arguments: [message, Data(recipient)])
            let waiting = try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM recipients WHERE message = ? AND confirmed = 0"),
                arguments: [message]) ?? 0
            if (row[1] as Bool) && waiting == 0 {
                try db.cachedStatement(sql: "DELETE FROM chunks WHERE message = ?").execute(arguments: [message])
                try db.cachedStatement(sql: "UPDATE messages SET ready = 2 WHERE row = ?").execute(arguments: [message])
                // Content deleted on confirmation no longer counts against any quota.
                let group = [UInt8](row[3] as Data)
                try Self.count(db, -(row[2] as Int64), in: Self.scopes(group, owner: try Self.owner(db, group)))
            }
            return true
        }
    }

    func receipts(group: [UInt8], id: [UInt8], sender: [UInt8], now: UInt64) async throws -> (recipients: Int, confirmed: Int)? {
        try await read { db in
            try Row.fetchOne(db.cachedStatement(sql: """
                SELECT COUNT(*), COALESCE(SUM(r.confirmed), 0) FROM messages m JOIN recipients r ON r.message = m.row
                WHERE m.group_id = ? AND m.id = ? AND m.sender = ? AND m.ready > 0 AND m.expires > ?
                """), arguments: [Data(group), Data(id), Data(sender), Int64(now)])
                .flatMap { row in (row[0] as Int) == 0 ? nil : (recipients: row[0] as Int, confirmed: row[1] as Int) }
        }
    }

    func delete(group: [UInt8], id: [UInt8], sender: [UInt8]) async throws -> Bool {
        try await pool.write { db in
            try Self.deleteMessages(db, "group_id = ? AND id = ? AND sender = ?", [Data(group), Data(id), Data(sender)]) > 0
        }
    }

    func sweep(now: UInt64, staleBefore: UInt64) async throws -> Int {
        let deleted = try await pool.write { db in
            try db.execute(sql: "DELETE FROM messages WHERE expires <= ? OR (ready = 0 AND created < ?)",
                           arguments: [Int64(now), Int64(staleBefore)])
            var deleted = db.changesCount
            try db.execute(sql: "DELETE FROM links WHERE expires <= ? OR (ready = 0 AND created < ?)",
                           arguments: [Int64(now), Int64(staleBefore)])
            deleted += db.changesCount
            try db.execute(sql: "DELETE FROM invites WHERE expires <= ? OR uses <= 0", arguments: [Int64(now)])
            // The table of relays from before the nonce file (see `init`).
            try db.execute(sql: "DELETE FROM nonces WHERE expires <= ?", arguments: [Int64(now)])
            try Self.recount(db)
            return deleted
        }
        // Outside a transaction, as SQLite requires: overwrite the log's copies too.
        try await pool.writeWithoutTransaction { db in _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        // After the checkpoint, so a nonce file that fails cannot keep deleted shares in the
        // store's log.
        try await nonces.sweep(now: now)
        return deleted
    }

    private static func listed(_ row: Row) -> ListedMessage {
        ListedMessage(row: row[0], cursor: row[1], group: bytes(row, 2), id: bytes(row, 3), size: UInt64(row[4] as Int64),
                      expires: UInt64(row[5] as Int64), bodyHash: bytes(row, 6))
    }

    static func bytes(_ row: Row, _ column: Int) -> [UInt8] { [UInt8](row[column] as Data) }

    // MARK: Quotas

    /// What joins a message's recipient row to a member who accepted the group: removed
    /// members, and named ones who have not accepted, are served nothing.
    /// The guest box's messages (group id 16 zero bytes) are served to their recipient
    /// with no group.
    static let memberJoin = """
        LEFT JOIN members mb ON mb.group_id = m.group_id AND mb.signing_key = r.signing_key
        LEFT JOIN acceptances ac ON ac.group_id = m.group_id AND ac.signing_key = r.signing_key AND ac.accepted = 1
        """
    /// What `memberJoin` must find, in a WHERE clause.
    static let memberFound = "((mb.signing_key IS NOT NULL AND ac.signing_key IS NOT NULL) OR m.group_id = \(guestBox))"
    /// The guest box's id as an SQL literal.
    static let guestBox = "x'00000000000000000000000000000000'"

    /// Bytes counted against a scope: a group id (16 bytes, its messages), an owner key (32,
    /// the messages and records of its groups), or none (the relay's total).
    static func used(_ db: Database, _ scope: [UInt8]) throws -> UInt64 {
        UInt64(max(0, try Int64.fetchOne(db.cachedStatement(sql: "SELECT bytes FROM usage WHERE scope = ?"), arguments: [Data(scope)]) ?? 0))
    }

    static func count(_ db: Database, _ bytes: Int64, in scopes: [[UInt8]]) throws {
        for scope in scopes {
            try db.cachedStatement(sql: "INSERT INTO usage (scope, bytes) VALUES (?, ?) ON CONFLICT (scope) DO UPDATE SET bytes = bytes + excluded.bytes")
                .execute(arguments: [Data(scope), bytes])
        }
    }

    /// The quotas a message of `group` counts against: its group's, its owner's (the guest
    /// box has none) and the relay's.
    static func scopes(_ group: [UInt8], owner: [UInt8]) -> [[UInt8]] {
        owner.isEmpty ? [group, []] : [group, owner, []]
    }

    static func owner(_ db: Database, _ group: [UInt8]) throws -> [UInt8] {
        try Data.fetchOne(db.cachedStatement(sql: "SELECT owner FROM groups WHERE id = ?"), arguments: [Data(group)]).map { [UInt8]($0) } ?? []
    }

    /// Deletes the messages `condition` selects and takes what they counted off the quotas.
    @discardableResult
    static func deleteMessages(_ db: Database, _ condition: String, _ arguments: StatementArguments) throws -> Int {
        let deleted = try Row.fetchAll(db.cachedStatement(sql: "DELETE FROM messages WHERE \(condition) RETURNING group_id, size, ready"),
            arguments: arguments)
        for row in deleted where (row[2] as Int64) < 2 {
            let group = bytes(row, 0)
            try count(db, -(row[1] as Int64), in: scopes(group, owner: try owner(db, group)))
        }
        return deleted.count
    }

    /// Counts every quota's usage again from the messages and records there are.
    static func recount(_ db: Database) throws {
        try db.execute(sql: """
            DELETE FROM usage;
            INSERT INTO usage (scope, bytes) SELECT group_id, SUM(size) FROM messages WHERE ready < 2 GROUP BY group_id;
            INSERT INTO usage (scope, bytes)
                SELECT owner, SUM(bytes) FROM (SELECT g.owner AS owner, m.size AS bytes FROM messages m JOIN groups g ON g.id = m.group_id
                                               WHERE m.ready < 2
                                               UNION ALL SELECT owner, length(record) FROM groups) GROUP BY owner;
            INSERT INTO usage (scope, bytes) VALUES (x'', (SELECT COALESCE(SUM(size), 0) FROM messages WHERE ready < 2)
                                                       + (SELECT COALESCE(SUM(length(record)), 0) FROM groups));
            """)
    }
}

/// Why the relay cannot start, in words.
public struct RelayStartFailure: Error, UserFacingError {
    /// What went wrong.
    public let description: String
    init(_ description: String) { self.description = description }
}
