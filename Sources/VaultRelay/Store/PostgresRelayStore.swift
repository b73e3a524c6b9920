import Foundation
import Logging
import NIOSSL
import PostgresNIO
import VaultCore

/// The store for deployments that outgrow one machine: PostgreSQL (PostgresNIO), which
/// several relay processes can share as one relay (one identity, one set of nonces).
///
/// Messages, their recipients and chunks, and nonces live in UNLOGGED tables: PostgreSQL
/// writes no WAL for them, so a deleted message leaves no copy in the log or in a replica,
/// and a crash empties them, which a relay may do (Docs/RELAY.md, "Storage"). The relay's
/// identity and its groups are ordinary tables: losing them would change the relay's card
/// under every client that pinned it.
///
/// Processes sharing the database wake each other's waiting lists: finishing a message
/// sends a `NOTIFY` naming its recipients, and each process `LISTEN`s on a connection of
/// its own (Docs/RELAY.md, "PostgreSQL").
final class PostgresRelayStore: RelayStore {
    let client: PostgresClient
    let logger: Logger
    /// Where it connects.
    let location: Location
    /// This process's waiting lists, which other processes' messages wake.
    private let waiters: MessageWaiters
    /// This process's mark on its notifications: it wakes its own waiters as it finishes a
    /// message, and skips its own notification when it comes back.
    private let tag = SecureRandom().bytes(8).hex

    /// Where to connect: `postgres://USER@HOST[:PORT]/DATABASE[?sslmode=disable|require][&connect_timeout=S]`.
    /// The password comes from `PGPASSWORD`, never from the command line (which any local
    /// user can read in the process list).
    struct Location: Equatable, Sendable {
        let host: String
        let port: Int
        let user: String
        let database: String
        let requireTLS: Bool
        /// Seconds to connect and log in at start (`connect_timeout`, as libpq names it).
        let connectTimeout: Int64

        /// `HOST:PORT`, for errors.
        var server: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

        init(url text: String) throws {
            guard let url = URLComponents(string: text), url.scheme == "postgres" || url.scheme == "postgresql",
                  let host = url.host, !host.isEmpty, let user = url.user, !user.isEmpty else {
                throw RelayStartFailure("--store postgres:// takes postgres://USER@HOST[:PORT]/DATABASE")
            }
            guard url.password == nil else {
                throw RelayStartFailure("the PostgreSQL password goes in PGPASSWORD, not in --store, where other users can read it")
            }
            let database = String(url.path.dropFirst())
            guard !database.isEmpty, !database.contains("/") else { throw RelayStartFailure("--store postgres:// names no database") }
            for item in url.queryItems ?? [] where item.name != "sslmode" && item.name != "connect_timeout" {
                throw RelayStartFailure("--store postgres:// takes sslmode and connect_timeout only, not \(TerminalText.escaped(item.name))")
            }
            let timeout = url.queryItems?.first { $0.name == "connect_timeout" }?.value
            guard let seconds = timeout.map({ Int64($0) }) ?? 10, (1...3600).contains(seconds) else {
                throw RelayStartFailure("connect_timeout is 1 to 3600 seconds")
            }
            connectTimeout = seconds
            let mode = url.queryItems?.first { $0.name == "sslmode" }?.value
            // Loopback needs no TLS; anything else requires it unless told otherwise.
            let loopback = host == "127.0.0.1" || host == "::1" || host == "localhost"
            switch mode {
            case nil: requireTLS = !loopback
            case "disable": requireTLS = false
            case "require": requireTLS = true
            default: throw RelayStartFailure("sslmode is disable or require")
            }
            self.host = host
            self.port = url.port ?? 5432
            self.user = user
            self.database = database
        }
    }

    init(_ location: Location, waiters: MessageWaiters) {
        self.waiters = waiters
        var logger = Logger(label: "vault-relay-postgres")
        logger.logLevel = .error
        self.logger = logger
        self.location = location
        let tls: PostgresClient.Configuration.TLS = location.requireTLS ? .require(.makeClientConfiguration()) : .disable
        var configuration = PostgresClient.Configuration(host: location.host, port: location.port, username: location.user,
                                                         password: ProcessInfo.processInfo.environment["PGPASSWORD"],
                                                         database: location.database, tls: tls)
        configuration.options.connectTimeout = .seconds(location.connectTimeout)
        client = PostgresClient(configuration: configuration, backgroundLogger: logger)
    }

    func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.client.run() }
            group.addTask { await self.listen() }
        }
    }

    /// Creates the tables, once, under a lock: processes starting together on an empty
    /// database would otherwise race to create the same ones.
    func prepare() async throws {
        try await checkConnection()
        try await client.withTransaction(logger: logger) { db in
            try await db.query("SELECT pg_advisory_xact_lock(7780)", logger: logger)
            try await db.query("SELECT pg_advisory_xact_lock(\(Self.finishLock))", logger: logger)
            for statement in Self.schema + Self.linkSchema { try await db.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
        }
    }

    private static let schema = [
        "CREATE TABLE IF NOT EXISTS relay_identity (id INTEGER PRIMARY KEY CHECK (id = 1), secret BYTEA NOT NULL)",
        "CREATE TABLE IF NOT EXISTS relay_groups (id BYTEA PRIMARY KEY, version BIGINT NOT NULL, owner BYTEA NOT NULL, record BYTEA NOT NULL)",
        """
        CREATE TABLE IF NOT EXISTS relay_members (group_id BYTEA NOT NULL REFERENCES relay_groups(id) ON DELETE CASCADE,
                                                 signing_key BYTEA NOT NULL, PRIMARY KEY (group_id, signing_key))
        """,
        "CREATE INDEX IF NOT EXISTS relay_members_by_key ON relay_members(signing_key)",
        "CREATE UNLOGGED TABLE IF NOT EXISTS relay_nonces (nonce BYTEA PRIMARY KEY, expires BIGINT NOT NULL)",
        """
        CREATE UNLOGGED TABLE IF NOT EXISTS relay_messages (
            row BIGSERIAL PRIMARY KEY, group_id BYTEA NOT NULL, id BYTEA NOT NULL, sender BYTEA NOT NULL, size BIGINT NOT NULL,
            expires BIGINT NOT NULL, delete_when_confirmed BOOLEAN NOT NULL, body_hash BYTEA NOT NULL,
            ready SMALLINT NOT NULL DEFAULT 0, created BIGINT NOT NULL, UNIQUE (group_id, id))
        """,
        "CREATE INDEX IF NOT EXISTS relay_messages_by_expiry ON relay_messages(expires)",
        // Cursors (`finished`): in the order messages were finished, from a sequence of
        // their own. It is logged, unlike the table, so a crash that empties the table does
        // not hand out cursors that clients already saw. Messages of a relay from before
        // cursors were kept get theirs here, once.
        "CREATE SEQUENCE IF NOT EXISTS relay_finished",
        "ALTER TABLE relay_messages ADD COLUMN IF NOT EXISTS finished BIGINT",
        "UPDATE relay_messages SET finished = nextval('relay_finished') WHERE ready > 0 AND finished IS NULL",
        """
        CREATE UNLOGGED TABLE IF NOT EXISTS relay_recipients (
            message BIGINT NOT NULL REFERENCES relay_messages(row) ON DELETE CASCADE, signing_key BYTEA NOT NULL,
            confirmed BOOLEAN NOT NULL DEFAULT FALSE, PRIMARY KEY (message, signing_key))
        """,
        "CREATE INDEX IF NOT EXISTS relay_recipients_by_key ON relay_recipients(signing_key, confirmed)",
        """
        CREATE UNLOGGED TABLE IF NOT EXISTS relay_chunks (
            message BIGINT NOT NULL REFERENCES relay_messages(row) ON DELETE CASCADE, n INTEGER NOT NULL, bytes BYTEA NOT NULL,
            PRIMARY KEY (message, n))
        """,
    ]

    func identitySecret(create: @Sendable () -> [UInt8]) async throws -> [UInt8] {
        let fresh = Data(create())
        // Whichever process inserts first wins; the others read its secret.
        try await client.query("INSERT INTO relay_identity (id, secret) VALUES (1, \(fresh)) ON CONFLICT (id) DO NOTHING", logger: logger)
        for try await secret in try await client.query("SELECT secret FROM relay_identity WHERE id = 1", logger: logger).decode(Data.self) {
            return [UInt8](secret)
        }
        throw RelayStartFailure("the relay's identity could not be stored")
    }

    func remember(nonce: [UInt8], expires: UInt64) async throws -> Bool {
        try await exists("""
            INSERT INTO relay_nonces (nonce, expires) VALUES (\(Data(nonce)), \(Int64(expires))) ON CONFLICT (nonce) DO NOTHING RETURNING 1
            """)
    }

    func group(id: [UInt8]) async throws -> StoredGroup? {
        let rows = try await client.query("SELECT id, version, owner, record FROM relay_groups WHERE id = \(Data(id))", logger: logger)
        for try await row in rows.decode((Data, Int64, Data, Data).self) { return Self.group(row) }
        return nil
    }

    func put(group: StoredGroup, members: [[UInt8]]) async throws -> Bool {
        try await client.withTransaction(logger: logger) { db in
            let id = Data(group.id)
            var stored: Int64?
            for try await version in try await db.query("SELECT version FROM relay_groups WHERE id = \(id) FOR UPDATE", logger: logger)
                .decode(Int64.self) { stored = version }
            if let stored {
                guard UInt64(stored) < group.version else { return false }
                try await db.query("UPDATE relay_groups SET version = \(Int64(group.version)), record = \(Data(group.record)) WHERE id = \(id)",
                                   logger: logger)
                try await db.query("DELETE FROM relay_members WHERE group_id = \(id)", logger: logger)
            } else {
                let inserted = try await db.query("""
                    INSERT INTO relay_groups (id, version, owner, record) VALUES (\(id), \(Int64(group.version)), \(Data(group.owner)),
                    \(Data(group.record))) ON CONFLICT (id) DO NOTHING RETURNING 1
                    """, logger: logger)
                var created = false
                for try await _ in inserted { created = true }
                // Another process registered it in between: the caller retries, as after a stale version.
                guard created else { return false }
            }
            for member in members {
                try await db.query("INSERT INTO relay_members (group_id, signing_key) VALUES (\(id), \(Data(member)))", logger: logger)
            }
            return true
        }
    }

    func groups(member: [UInt8]) async throws -> [StoredGroup] {
        let rows = try await client.query("""
            SELECT g.id, g.version, g.owner, g.record FROM relay_groups g JOIN relay_members m ON m.group_id = g.id
            WHERE m.signing_key = \(Data(member)) ORDER BY g.id
            """, logger: logger)
        var groups: [StoredGroup] = []
        for try await row in rows.decode((Data, Int64, Data, Data).self) { groups.append(Self.group(row)) }
        return groups
    }

    func isMember(_ key: [UInt8], of group: [UInt8]) async throws -> Bool {
        try await exists("SELECT 1 FROM relay_members WHERE group_id = \(Data(group)) AND signing_key = \(Data(key))")
    }

    func isMember(_ key: [UInt8]) async throws -> Bool {
        try await exists("SELECT 1 FROM relay_members WHERE signing_key = \(Data(key)) LIMIT 1")
    }

    func begin(message: NewMessage, quota: UInt64, now: UInt64) async throws -> Int64? {
        let outcome: Int64? = try await client.withTransaction(logger: logger) { db in
            // One upload at a time per group across processes, so two cannot both fit the
            // quota's last bytes.
            try await db.query("SELECT pg_advisory_xact_lock(\(Self.lockKey(message.group)))", logger: logger)
            var used: Int64 = 0
            for try await sum in try await db.query("""
                SELECT COALESCE(SUM(size), 0)::BIGINT FROM relay_messages WHERE group_id = \(Data(message.group)) AND expires > \(Int64(now)) AND ready < 2
                """, logger: logger).decode(Int64.self) { used = sum }
            guard UInt64(used) + message.size <= quota else { return nil }
            var row: Int64?
            for try await inserted in try await db.query("""
                INSERT INTO relay_messages (group_id, id, sender, size, expires, delete_when_confirmed, body_hash, created)
                VALUES (\(Data(message.group)), \(Data(message.id)), \(Data(message.sender)), \(Int64(message.size)), \(Int64(message.expires)),
                        \(message.deleteWhenConfirmed), \(Data(message.bodyHash)), \(Int64(message.created)))
                ON CONFLICT (group_id, id) DO NOTHING RETURNING row
                """, logger: logger).decode(Int64.self) { row = inserted }
            guard let row else { return -1 }
            for recipient in message.recipients {
                try await db.query("INSERT INTO relay_recipients (message, signing_key) VALUES (\(row), \(Data(recipient)))", logger: logger)
            }
            return row
        }
        if outcome == -1 { throw RelayStoreConflict() }
        return outcome
    }

    func append(chunk: [UInt8], index: Int, to message: Int64) async throws {
        try await client.query("INSERT INTO relay_chunks (message, n, bytes) VALUES (\(message), \(index), \(Data(chunk)))", logger: logger)
    }

    /// Gives the message the next cursor and serves it, then tells every process of its
    /// recipients. Messages are finished one at a time, across processes: with two at once,
    /// the later cursor could commit first, and a list taken in between would show it
    /// without the earlier one, which a client asking for what came after it would never
    /// see. The notification is sent when the transaction commits, so a process that hears
    /// it finds the message.
    func finish(message: Int64) async throws {
        try await client.withTransaction(logger: logger) { db in
            try await db.query("SELECT pg_advisory_xact_lock(\(Self.finishLock))", logger: logger)
            try await db.query("UPDATE relay_messages SET ready = 1, finished = nextval('relay_finished') WHERE row = \(message)",
                               logger: logger)
            var keys: [String] = []
            for try await key in try await db.query("SELECT signing_key FROM relay_recipients WHERE message = \(message)", logger: logger)
                .decode(Data.self) { keys.append(key.hex) }
            // A payload is at most 8000 bytes: 100 keys of 64 hex digits each, and the tag.
            for start in stride(from: 0, to: keys.count, by: 100) {
                let payload = ([tag] + keys[start..<min(keys.count, start + 100)]).joined(separator: " ")
                try await db.query("SELECT pg_notify(\(Self.channel), \(payload))", logger: logger)
            }
        }
    }

    /// The channel of `NOTIFY`s: a tag, then recipients' keys in hex, separated by spaces.
    private static let channel = "vault_relay_messages"
    /// The advisory lock that finishes messages one at a time (and the schema's changes
    /// outside any finish).
    private static let finishLock: Int64 = 7782

    /// Wakes this process's waiters for what the other processes finish, on a pooled
    /// connection held for it, until cancelled. Each time it starts listening (again, after
    /// the connection dropped), every waiter looks again: what was finished while nobody
    /// listened sent its notification to nobody.
    private func listen() async {
        while !Task.isCancelled {
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: Self.channel) { notifications in
                        self.waiters.wakeAll()
                        for try await notification in notifications {
                            let words = notification.payload.split(separator: " ")
                            guard let tag = words.first, tag != self.tag else { continue }
                            self.waiters.wake(words.dropFirst().map(String.init))
                        }
                    }
                }
            } catch {
                // The connection dropped, or the database is down: try again in a second.
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    func abandon(message: Int64) async throws {
        try await client.query("DELETE FROM relay_messages WHERE row = \(message)", logger: logger)
    }

    func messages(for recipient: [UInt8], after cursor: Int64, limit: Int, now: UInt64) async throws -> [ListedMessage] {
        try await listed("""
            SELECT m.row, m.finished, m.group_id, m.id, m.size, m.expires, m.body_hash FROM relay_messages m
            JOIN relay_recipients r ON r.message = m.row
            JOIN relay_members mb ON mb.group_id = m.group_id AND mb.signing_key = r.signing_key
            WHERE r.signing_key = \(Data(recipient)) AND NOT r.confirmed AND m.ready = 1 AND m.expires > \(Int64(now))
              AND m.finished > \(cursor)
            ORDER BY m.finished LIMIT \(limit)
            """)
    }

    func message(group: [UInt8], id: [UInt8], for recipient: [UInt8], now: UInt64) async throws -> ListedMessage? {
        try await listed("""
            SELECT m.row, COALESCE(m.finished, 0), m.group_id, m.id, m.size, m.expires, m.body_hash FROM relay_messages m
            JOIN relay_recipients r ON r.message = m.row
            JOIN relay_members mb ON mb.group_id = m.group_id AND mb.signing_key = r.signing_key
            WHERE m.group_id = \(Data(group)) AND m.id = \(Data(id)) AND r.signing_key = \(Data(recipient)) AND m.ready = 1
              AND m.expires > \(Int64(now))
            """).first
    }

    func chunk(_ index: Int, of message: Int64) async throws -> [UInt8]? {
        let rows = try await client.query("SELECT bytes FROM relay_chunks WHERE message = \(message) AND n = \(index)", logger: logger)
        for try await bytes in rows.decode(Data.self) { return [UInt8](bytes) }
        return nil
    }

    func confirm(group: [UInt8], id: [UInt8], by recipient: [UInt8], now: UInt64) async throws -> Bool {
        try await client.withTransaction(logger: logger) { db in
            var found: (Int64, Bool)?
            for try await row in try await db.query("""
                SELECT m.row, m.delete_when_confirmed FROM relay_messages m
                JOIN relay_recipients r ON r.message = m.row
                JOIN relay_members mb ON mb.group_id = m.group_id AND mb.signing_key = r.signing_key
                WHERE m.group_id = \(Data(group)) AND m.id = \(Data(id)) AND r.signing_key = \(Data(recipient)) AND m.ready = 1
                  AND m.expires > \(Int64(now))
                FOR UPDATE OF m
                """, logger: logger).decode((Int64, Bool).self) { found = row }
            guard let (message, deleteWhenConfirmed) = found else { return false }
            try await db.query("UPDATE relay_recipients SET confirmed = TRUE WHERE message = \(message) AND signing_key = \(Data(recipient))",
                               logger: logger)
            var waiting = 0
            for try await count in try await db.query("""
                SELECT COUNT(*)::BIGINT FROM relay_recipients WHERE message = \(message) AND NOT confirmed
                """, logger: logger).decode(Int64.self) { waiting = Int(count) }
            if deleteWhenConfirmed && waiting == 0 {
                try await db.query("DELETE FROM relay_chunks WHERE message = \(message)", logger: logger)
                try await db.query("UPDATE relay_messages SET ready = 2 WHERE row = \(message)", logger: logger)
            }
            return true
        }
    }

    func receipts(group: [UInt8], id: [UInt8], sender: [UInt8], now: UInt64) async throws -> (recipients: Int, confirmed: Int)? {
        let rows = try await client.query("""
            SELECT COUNT(*)::BIGINT, COUNT(*) FILTER (WHERE r.confirmed)::BIGINT FROM relay_messages m
            JOIN relay_recipients r ON r.message = m.row
            WHERE m.group_id = \(Data(group)) AND m.id = \(Data(id)) AND m.sender = \(Data(sender)) AND m.ready > 0 AND m.expires > \(Int64(now))
            """, logger: logger)
        for try await (recipients, confirmed) in rows.decode((Int64, Int64).self) where recipients > 0 {
            return (Int(recipients), Int(confirmed))
        }
        return nil
    }

    func delete(group: [UInt8], id: [UInt8], sender: [UInt8]) async throws -> Bool {
        try await exists("""
            DELETE FROM relay_messages WHERE group_id = \(Data(group)) AND id = \(Data(id)) AND sender = \(Data(sender)) RETURNING 1
            """)
    }

    func sweep(now: UInt64, staleBefore: UInt64) async throws -> Int {
        var deleted = 0
        for try await _ in try await client.query("""
            DELETE FROM relay_messages WHERE expires <= \(Int64(now)) OR (ready = 0 AND created < \(Int64(staleBefore))) RETURNING 1
            """, logger: logger) { deleted += 1 }
        for try await _ in try await client.query("""
            DELETE FROM relay_links WHERE expires <= \(Int64(now)) OR (ready = 0 AND created < \(Int64(staleBefore))) RETURNING 1
            """, logger: logger) { deleted += 1 }
        try await client.query("DELETE FROM relay_nonces WHERE expires <= \(Int64(now))", logger: logger)
        return deleted
    }

    /// Whether the query returns a row.
    func exists(_ query: PostgresQuery) async throws -> Bool {
        for try await _ in try await client.query(query, logger: logger) { return true }
        return false
    }

    private func listed(_ query: PostgresQuery) async throws -> [ListedMessage] {
        var listed: [ListedMessage] = []
        for try await (row, cursor, group, id, size, expires, hash) in try await client.query(query, logger: logger)
            .decode((Int64, Int64, Data, Data, Int64, Int64, Data).self) {
            listed.append(ListedMessage(row: row, cursor: cursor, group: [UInt8](group), id: [UInt8](id), size: UInt64(size),
                                        expires: UInt64(expires), bodyHash: [UInt8](hash)))
        }
        return listed
    }

    private static func group(_ row: (Data, Int64, Data, Data)) -> StoredGroup {
        StoredGroup(id: [UInt8](row.0), version: UInt64(row.1), owner: [UInt8](row.2), record: [UInt8](row.3))
    }

    /// An advisory lock's key for a group: its id's first 8 bytes.
    private static func lockKey(_ group: [UInt8]) -> Int64 {
        Int64(bitPattern: group.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
    }
}
