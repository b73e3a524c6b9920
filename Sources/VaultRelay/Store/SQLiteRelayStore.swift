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

    init(path: String) throws {
        if !FileManager.default.fileExists(atPath: path) {
            let fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0o600)
            guard fd >= 0 else { throw RelayStartFailure("cannot create \(path): \(String(cString: strerror(errno)))") }
            close(fd)
        }
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
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
        try migrator.migrate(pool)
    }

    /// Nothing runs in the background.
    func run() async throws {
        while true { try await Task.sleep(for: .seconds(86_400)) }
    }

    /// The tables were made as the file opened.
    func prepare() async throws {}

    func identitySecret(create: @Sendable () -> [UInt8]) async throws -> [UInt8] {
        try await pool.write { db in
            if let secret = try Data.fetchOne(db, sql: "SELECT secret FROM relay_identity WHERE id = 1") { return [UInt8](secret) }
            let secret = create()
            try db.execute(sql: "INSERT INTO relay_identity (id, secret) VALUES (1, ?)", arguments: [Data(secret)])
            return secret
        }
    }

    func remember(nonce: [UInt8], expires: UInt64) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "INSERT OR IGNORE INTO nonces (nonce, expires) VALUES (?, ?)", arguments: [Data(nonce), Int64(expires)])
            return db.changesCount == 1
        }
    }

    func group(id: [UInt8]) async throws -> StoredGroup? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT id, version, owner, record FROM groups WHERE id = ?", arguments: [Data(id)]).map(Self.group)
        }
    }

    func put(group: StoredGroup, members: [[UInt8]]) async throws -> Bool {
        try await pool.write { db in
            if let version = try Int64.fetchOne(db, sql: "SELECT version FROM groups WHERE id = ?", arguments: [Data(group.id)]) {
                guard UInt64(version) < group.version else { return false }
                try db.execute(sql: "UPDATE groups SET version = ?, record = ? WHERE id = ?",
                               arguments: [Int64(group.version), Data(group.record), Data(group.id)])
                try db.execute(sql: "DELETE FROM members WHERE group_id = ?", arguments: [Data(group.id)])
            } else {
                try db.execute(sql: "INSERT INTO groups (id, version, owner, record) VALUES (?, ?, ?, ?)",
                               arguments: [Data(group.id), Int64(group.version), Data(group.owner), Data(group.record)])
            }
            for member in members {
                try db.execute(sql: "INSERT INTO members (group_id, signing_key) VALUES (?, ?)", arguments: [Data(group.id), Data(member)])
            }
            return true
        }
    }

    func groups(member: [UInt8]) async throws -> [StoredGroup] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT g.id, g.version, g.owner, g.record FROM groups g JOIN members m ON m.group_id = g.id
                WHERE m.signing_key = ? ORDER BY g.id
                """, arguments: [Data(member)]).map(Self.group)
        }
    }

    func isMember(_ key: [UInt8], of group: [UInt8]) async throws -> Bool {
        try await pool.read { db in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM members WHERE group_id = ? AND signing_key = ?", arguments: [Data(group), Data(key)]) ?? false
        }
    }

    func isMember(_ key: [UInt8]) async throws -> Bool {
        try await pool.read { db in try Bool.fetchOne(db, sql: "SELECT 1 FROM members WHERE signing_key = ? LIMIT 1", arguments: [Data(key)]) ?? false }
    }

    func begin(message: NewMessage, quota: UInt64, now: UInt64) async throws -> Int64? {
        try await pool.write { db in
            let used = try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(size), 0) FROM messages WHERE group_id = ? AND expires > ? AND ready < 2",
                                          arguments: [Data(message.group), Int64(now)]) ?? 0
            guard UInt64(used) + message.size <= quota else { return nil }
            do {
                try db.execute(sql: """
                    INSERT INTO messages (group_id, id, sender, size, expires, delete_when_confirmed, body_hash, created)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """, arguments: [Data(message.group), Data(message.id), Data(message.sender), Int64(message.size),
                                     Int64(message.expires), message.deleteWhenConfirmed, Data(message.bodyHash), Int64(message.created)])
            } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
                throw RelayStoreConflict()
            }
            let row = db.lastInsertedRowID
            for recipient in message.recipients {
                try db.execute(sql: "INSERT INTO recipients (message, signing_key) VALUES (?, ?)", arguments: [row, Data(recipient)])
            }
            return row
        }
    }

    func append(chunk: [UInt8], index: Int, to message: Int64) async throws {
        try await pool.write { db in
            try db.execute(sql: "INSERT INTO chunks (message, n, bytes) VALUES (?, ?, ?)", arguments: [message, index, Data(chunk)])
        }
    }

    /// One writer at a time: cursors are handed out in the order the messages become visible.
    func finish(message: Int64) async throws {
        try await pool.write { db in
            try db.execute(sql: "UPDATE message_cursor SET last = last + 1 WHERE id = 1")
            try db.execute(sql: "UPDATE messages SET ready = 1, finished = (SELECT last FROM message_cursor WHERE id = 1) WHERE row = ?",
                           arguments: [message])
        }
    }

    func abandon(message: Int64) async throws {
        try await pool.write { db in try db.execute(sql: "DELETE FROM messages WHERE row = ?", arguments: [message]) }
    }

    func messages(for recipient: [UInt8], after cursor: Int64, limit: Int, now: UInt64) async throws -> [ListedMessage] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT m.row, m.finished, m.group_id, m.id, m.size, m.expires, m.body_hash FROM messages m
                JOIN recipients r ON r.message = m.row
                JOIN members mb ON mb.group_id = m.group_id AND mb.signing_key = r.signing_key
                WHERE r.signing_key = ? AND r.confirmed = 0 AND m.ready = 1 AND m.expires > ? AND m.finished > ?
                ORDER BY m.finished LIMIT ?
                """, arguments: [Data(recipient), Int64(now), cursor, limit]).map(Self.listed)
        }
    }

    func message(group: [UInt8], id: [UInt8], for recipient: [UInt8], now: UInt64) async throws -> ListedMessage? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: """
                SELECT m.row, COALESCE(m.finished, 0), m.group_id, m.id, m.size, m.expires, m.body_hash FROM messages m
                JOIN recipients r ON r.message = m.row
                JOIN members mb ON mb.group_id = m.group_id AND mb.signing_key = r.signing_key
                WHERE m.group_id = ? AND m.id = ? AND r.signing_key = ? AND m.ready = 1 AND m.expires > ?
                """, arguments: [Data(group), Data(id), Data(recipient), Int64(now)]).map(Self.listed)
        }
    }

    func chunk(_ index: Int, of message: Int64) async throws -> [UInt8]? {
        try await pool.read { db in
            try Data.fetchOne(db, sql: "SELECT bytes FROM chunks WHERE message = ? AND n = ?", arguments: [message, index]).map { [UInt8]($0) }
        }
    }

    func confirm(group: [UInt8], id: [UInt8], by recipient: [UInt8], now: UInt64) async throws -> Bool {
        try await pool.write { db in
            guard let row = try Row.fetchOne(db, sql: """
                SELECT m.row, m.delete_when_confirmed FROM messages m
                JOIN recipients r ON r.message = m.row
                JOIN members mb ON mb.group_id = m.group_id AND mb.signing_key = r.signing_key
                WHERE m.group_id = ? AND m.id = ? AND r.signing_key = ? AND m.ready = 1 AND m.expires > ?
                """, arguments: [Data(group), Data(id), Data(recipient), Int64(now)]) else { return false }
            let message: Int64 = row[0]
            try db.execute(sql: "UPDATE recipients SET confirmed = 1 WHERE message = ? AND signing_key = ?", arguments: [message, Data(recipient)])
            let waiting = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM recipients WHERE message = ? AND confirmed = 0", arguments: [message]) ?? 0
            if (row[1] as Bool) && waiting == 0 {
                try db.execute(sql: "DELETE FROM chunks WHERE message = ?", arguments: [message])
                try db.execute(sql: "UPDATE messages SET ready = 2 WHERE row = ?", arguments: [message])
            }
            return true
        }
    }

    func receipts(group: [UInt8], id: [UInt8], sender: [UInt8], now: UInt64) async throws -> (recipients: Int, confirmed: Int)? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: """
                SELECT COUNT(*), COALESCE(SUM(r.confirmed), 0) FROM messages m JOIN recipients r ON r.message = m.row
                WHERE m.group_id = ? AND m.id = ? AND m.sender = ? AND m.ready > 0 AND m.expires > ?
                """, arguments: [Data(group), Data(id), Data(sender), Int64(now)])
                .flatMap { row in (row[0] as Int) == 0 ? nil : (recipients: row[0] as Int, confirmed: row[1] as Int) }
        }
    }

    func delete(group: [UInt8], id: [UInt8], sender: [UInt8]) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM messages WHERE group_id = ? AND id = ? AND sender = ?", arguments: [Data(group), Data(id), Data(sender)])
            return db.changesCount > 0
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
            try db.execute(sql: "DELETE FROM nonces WHERE expires <= ?", arguments: [Int64(now)])
            return deleted
        }
        // Outside a transaction, as SQLite requires: overwrite the log's copies too.
        try await pool.writeWithoutTransaction { db in _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        return deleted
    }

    private static func group(_ row: Row) -> StoredGroup {
        StoredGroup(id: bytes(row, 0), version: UInt64(row[1] as Int64), owner: bytes(row, 2), record: bytes(row, 3))
    }

    private static func listed(_ row: Row) -> ListedMessage {
        ListedMessage(row: row[0], cursor: row[1], group: bytes(row, 2), id: bytes(row, 3), size: UInt64(row[4] as Int64),
                      expires: UInt64(row[5] as Int64), bodyHash: bytes(row, 6))
    }

    private static func bytes(_ row: Row, _ column: Int) -> [UInt8] { [UInt8](row[column] as Data) }
}

/// Why the relay cannot start, in words.
public struct RelayStartFailure: Error, UserFacingError {
    /// What went wrong.
    public let description: String
    init(_ description: String) { self.description = description }
}
