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
            for statement in Self.schema + Self.linkSchema + Self.openInternetSchema + Self.functions {
                try await db.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
            // Members from before opt-in keep being served, once: later starts must not
            // accept for members who declined or never answered.
            let migrated = try await db.query("""
                INSERT INTO relay_migrations (name) VALUES ('v4-open-internet') ON CONFLICT (name) DO NOTHING RETURNING 1
                """, logger: logger)
            var first = false
            for try await _ in migrated { first = true }
            if first {
                try await db.query("""
                    INSERT INTO relay_acceptances (group_id, signing_key, accepted) SELECT group_id, signing_key, TRUE FROM relay_members
                    ON CONFLICT DO NOTHING
                    """, logger: logger)
            }
            // Invitations name the owner by its whole card, which the records hold.
            var unnamed: [(Data, Data)] = []
            for try await row in try await db.query("SELECT id, record FROM relay_groups WHERE owner_card IS NULL", logger: logger)
                .decode((Data, Data).self) { unnamed.append(row) }
            for (id, bytes) in unnamed {
                guard let record = try? GroupRecord(parsing: [UInt8](bytes)) else { continue }
                try await db.query("UPDATE relay_groups SET owner_card = \(Data(record.owner.encoded)) WHERE id = \(id)", logger: logger)
            }
        }
        // Usage counts live in an UNLOGGED table, as the messages do, and the records they
        // count in a logged one: after a crash, they are counted again before any upload.
        try await client.withTransaction(logger: logger) { db in
            try await db.query("SELECT pg_advisory_xact_lock(\(Self.quotaLock))", logger: logger)
            try await Self.recount(db, logger: logger)
        }
    }

    /// Issue 37: opt-in, operator policy and quotas, the links' allowance and source.
    private static let openInternetSchema = [
        "CREATE TABLE IF NOT EXISTS relay_migrations (name TEXT PRIMARY KEY)",
        """
        CREATE TABLE IF NOT EXISTS relay_acceptances (group_id BYTEA NOT NULL REFERENCES relay_groups(id) ON DELETE CASCADE,
                                                     signing_key BYTEA NOT NULL, accepted BOOLEAN NOT NULL, PRIMARY KEY (group_id, signing_key))
        """,
        // Invitations are listed in the order groups were registered.
        "ALTER TABLE relay_groups ADD COLUMN IF NOT EXISTS registered BIGSERIAL",
        "CREATE INDEX IF NOT EXISTS relay_groups_by_owner ON relay_groups(owner)",
        "ALTER TABLE relay_groups ADD COLUMN IF NOT EXISTS owner_card BYTEA",
        "CREATE TABLE IF NOT EXISTS relay_invites (hash BYTEA PRIMARY KEY, uses INTEGER NOT NULL, expires BIGINT NOT NULL, created BIGINT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS relay_invited_owners (signing_key BYTEA PRIMARY KEY, invited BIGINT NOT NULL)",
        "CREATE UNLOGGED TABLE IF NOT EXISTS relay_usage (scope BYTEA PRIMARY KEY, bytes BIGINT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS relay_address_secret (id INTEGER PRIMARY KEY CHECK (id = 1), secret BYTEA NOT NULL)",
        "ALTER TABLE relay_links ADD COLUMN IF NOT EXISTS attempts_full BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE relay_links ADD COLUMN IF NOT EXISTS source BYTEA",
        "CREATE INDEX IF NOT EXISTS relay_links_by_source ON relay_links(source)",
    ]

    /// An upload's steps, each one call: PostgreSQL runs them in one statement's
    /// transaction, under the quota lock (then the finish lock) for as long as its own work
    /// takes, not for a dozen round trips to this process. Run as a dozen statements, one
    /// process stored 129 PUTs a second, and two processes fewer: every upload waited on the
    /// lock while its holder's statements went back and forth (Docs/DECISIONS.md).
    ///
    /// `vault_relay_begin` starts a message: its row; 0 when it exists; -1, -2, -3 when it
    /// would pass the group's, its owner's or the relay's quota. `vault_relay_finish` gives
    /// it the next cursor and serves it; `vault_relay_store_whole` stores a message of one
    /// chunk finished from the start. Both notify its recipients (`vault_relay_notify`: 100
    /// keys a payload, at most 8000 bytes with the tag). Sizes are added as NUMERIC: a quota
    /// of 2^63 - 1 bytes must not overflow.
    ///
    /// A whole message is inserted finished, not inserted then updated: every update leaves
    /// a dead row version behind for autovacuum. (The slow lists after a burst of uploads
    /// that this was first meant for came from the list's plan, fixed since; DECISIONS.md,
    /// "A list's plan on PostgreSQL".)
    private static let functions = [
        """
        CREATE OR REPLACE FUNCTION vault_relay_insert(p_group BYTEA, p_id BYTEA, p_sender BYTEA, p_size BIGINT, p_expires BIGINT,
                                                      p_delete_when_confirmed BOOLEAN, p_body_hash BYTEA, p_created BIGINT,
                                                      p_recipients BYTEA[], p_group_quota BIGINT, p_owner_quota BIGINT,
                                                      p_total_quota BIGINT, p_finished BOOLEAN) RETURNS BIGINT LANGUAGE plpgsql AS $$
        DECLARE
            v_owner BYTEA;
            v_row BIGINT;
        BEGIN
            PERFORM pg_advisory_xact_lock(\(quotaLock));
            v_owner := COALESCE((SELECT owner FROM relay_groups WHERE id = p_group), ''::BYTEA);
            IF COALESCE((SELECT GREATEST(bytes, 0) FROM relay_usage WHERE scope = p_group), 0)::NUMERIC + p_size > p_group_quota THEN
                RETURN -1;
            END IF;
            -- The guest box (no group) has no owner's quota.
            IF v_owner <> ''::BYTEA
               AND COALESCE((SELECT GREATEST(bytes, 0) FROM relay_usage WHERE scope = v_owner), 0)::NUMERIC + p_size > p_owner_quota THEN
                RETURN -2;
            END IF;
            IF COALESCE((SELECT GREATEST(bytes, 0) FROM relay_usage WHERE scope = ''::BYTEA), 0)::NUMERIC + p_size > p_total_quota THEN
                RETURN -3;
            END IF;
            -- A finished message takes its cursor under the finish lock, held to the commit:
            -- cursors become visible in the order they are handed out. The quota lock is
            -- taken first, as in every transaction that takes both.
            IF p_finished THEN
                PERFORM pg_advisory_xact_lock(\(finishLock));
            END IF;
            INSERT INTO relay_messages (group_id, id, sender, size, expires, delete_when_confirmed, body_hash, created, ready, finished)
            VALUES (p_group, p_id, p_sender, p_size, p_expires, p_delete_when_confirmed, p_body_hash, p_created,
                    CASE WHEN p_finished THEN 1 ELSE 0 END, CASE WHEN p_finished THEN nextval('relay_finished') END)
            ON CONFLICT (group_id, id) DO NOTHING RETURNING row INTO v_row;
            IF v_row IS NULL THEN
                RETURN 0;
            END IF;
            INSERT INTO relay_recipients (message, signing_key) SELECT v_row, unnest(p_recipients);
            -- One statement a scope; the guest box has no owner.
            INSERT INTO relay_usage (scope, bytes) VALUES (p_group, p_size)
            ON CONFLICT (scope) DO UPDATE SET bytes = relay_usage.bytes + excluded.bytes;
            IF v_owner <> ''::BYTEA THEN
                INSERT INTO relay_usage (scope, bytes) VALUES (v_owner, p_size)
                ON CONFLICT (scope) DO UPDATE SET bytes = relay_usage.bytes + excluded.bytes;
            END IF;
            INSERT INTO relay_usage (scope, bytes) VALUES (''::BYTEA, p_size)
            ON CONFLICT (scope) DO UPDATE SET bytes = relay_usage.bytes + excluded.bytes;
            RETURN v_row;
        END $$
        """,
        """
        CREATE OR REPLACE FUNCTION vault_relay_begin(p_group BYTEA, p_id BYTEA, p_sender BYTEA, p_size BIGINT, p_expires BIGINT,
                                                     p_delete_when_confirmed BOOLEAN, p_body_hash BYTEA, p_created BIGINT,
                                                     p_recipients BYTEA[], p_group_quota BIGINT, p_owner_quota BIGINT,
                                                     p_total_quota BIGINT) RETURNS BIGINT LANGUAGE plpgsql AS $$
        BEGIN
            RETURN vault_relay_insert(p_group, p_id, p_sender, p_size, p_expires, p_delete_when_confirmed, p_body_hash, p_created,
                                      p_recipients, p_group_quota, p_owner_quota, p_total_quota, FALSE);
        END $$
        """,
        """
        CREATE OR REPLACE FUNCTION vault_relay_notify(p_row BIGINT, p_tag TEXT) RETURNS VOID LANGUAGE plpgsql AS $$
        DECLARE
            v_keys TEXT[];
            v_start INTEGER := 1;
        BEGIN
            SELECT array_agg(encode(signing_key, 'hex')) INTO v_keys FROM relay_recipients WHERE message = p_row;
            WHILE v_start <= COALESCE(array_length(v_keys, 1), 0) LOOP
                PERFORM pg_notify('\(channel)', array_to_string(ARRAY[p_tag] || v_keys[v_start:v_start + 99], ' '));
                v_start := v_start + 100;
            END LOOP;
        END $$
        """,
        """
        CREATE OR REPLACE FUNCTION vault_relay_finish(p_row BIGINT, p_tag TEXT) RETURNS VOID LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock(\(finishLock));
            UPDATE relay_messages SET ready = 1, finished = nextval('relay_finished') WHERE row = p_row;
            PERFORM vault_relay_notify(p_row, p_tag);
        END $$
        """,
        """
        CREATE OR REPLACE FUNCTION vault_relay_store_whole(p_group BYTEA, p_id BYTEA, p_sender BYTEA, p_size BIGINT, p_expires BIGINT,
                                                           p_delete_when_confirmed BOOLEAN, p_body_hash BYTEA, p_created BIGINT,
                                                           p_recipients BYTEA[], p_group_quota BIGINT, p_owner_quota BIGINT,
                                                           p_total_quota BIGINT, p_bytes BYTEA, p_tag TEXT) RETURNS BIGINT
        LANGUAGE plpgsql AS $$
        DECLARE
            v_row BIGINT;
        BEGIN
            v_row := vault_relay_insert(p_group, p_id, p_sender, p_size, p_expires, p_delete_when_confirmed, p_body_hash, p_created,
                                        p_recipients, p_group_quota, p_owner_quota, p_total_quota, TRUE);
            IF v_row > 0 THEN
                IF length(p_bytes) > 0 THEN
                    INSERT INTO relay_chunks (message, n, bytes) VALUES (v_row, 0, p_bytes);
                END IF;
                PERFORM vault_relay_notify(v_row, p_tag);
            END IF;
            RETURN v_row;
        END $$
        """,
    ]

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
        try await secret(in: "relay_identity", create: create)
    }

    /// The secret of a one-row table (`id = 1`), made by `create` the first time. Whichever
    /// process inserts first wins; the others read its secret.
    func secret(in table: String, create: @Sendable () -> [UInt8]) async throws -> [UInt8] {
        let fresh = Data(create())
        try await client.query("INSERT INTO \(unescaped: table) (id, secret) VALUES (1, \(fresh)) ON CONFLICT (id) DO NOTHING", logger: logger)
        for try await secret in try await client.query("SELECT secret FROM \(unescaped: table) WHERE id = 1", logger: logger)
            .decode(Data.self) {
            return [UInt8](secret)
        }
        throw RelayStartFailure("the relay's \(table) could not be stored")
    }

    func remember(nonce: [UInt8], expires: UInt64) async throws -> Bool {
        try await exists("""
            INSERT INTO relay_nonces (nonce, expires) VALUES (\(Data(nonce)), \(Int64(expires))) ON CONFLICT (nonce) DO NOTHING RETURNING 1
            """)
    }

    func begin(message: NewMessage, quotas: Quotas, now: UInt64) async throws -> MessageBegin {
        try await stored(client.query("""
            SELECT vault_relay_begin(\(Data(message.group)), \(Data(message.id)), \(Data(message.sender)), \(Int64(message.size)),
                                     \(Int64(message.expires)), \(message.deleteWhenConfirmed), \(Data(message.bodyHash)),
                                     \(Int64(message.created)), \(message.recipients.map { ByteBuffer(bytes: $0) }),
                                     \(Int64(clamping: quotas.group)), \(Int64(clamping: quotas.owner)), \(Int64(clamping: quotas.total)))
            """, logger: logger))
    }

    func storeWhole(message: NewMessage, bytes: [UInt8], quotas: Quotas, now: UInt64) async throws -> MessageBegin {
        try await stored(client.query("""
            SELECT vault_relay_store_whole(\(Data(message.group)), \(Data(message.id)), \(Data(message.sender)), \(Int64(message.size)),
                                           \(Int64(message.expires)), \(message.deleteWhenConfirmed), \(Data(message.bodyHash)),
                                           \(Int64(message.created)), \(message.recipients.map { ByteBuffer(bytes: $0) }),
                                           \(Int64(clamping: quotas.group)), \(Int64(clamping: quotas.owner)),
                                           \(Int64(clamping: quotas.total)), \(Data(bytes)), \(tag))
            """, logger: logger))
    }

    /// What `vault_relay_begin` answered.
    private func stored(_ rows: PostgresRowSequence) async throws -> MessageBegin {
        for try await outcome in rows.decode(Int64.self) {
            switch outcome {
            case -1: return .overGroupQuota
            case -2: return .overOwnerQuota
            case -3: return .overTotalQuota
            case 1...: return .started(outcome)
            default: throw RelayStoreConflict()
            }
        }
        throw RelayStoreConflict()
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
        try await client.query("SELECT vault_relay_finish(\(message), \(tag))", logger: logger)
    }

    /// The channel of `NOTIFY`s: a tag, then recipients' keys in hex, separated by spaces.
    private static let channel = "vault_relay_messages"
    /// The advisory lock that finishes messages one at a time (and the schema's changes
    /// outside any finish).
    private static let finishLock: Int64 = 7782
    /// The advisory lock under which quotas are checked and counted, across processes.
    static let quotaLock: Int64 = 7783

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
        try await client.withTransaction(logger: logger) { db in
            _ = try await Self.deleteMessages(db, "DELETE FROM relay_messages WHERE row = \(message) RETURNING group_id, size, ready", logger: logger)
        }
    }

    /// A list's plan is fixed by how the query is written, not left to the planner, whose
    /// statistics lag a busy relay's newest groups (Docs/DECISIONS.md, "A list's plan"):
    /// - the caller's unconfirmed messages first (its index, a materialized CTE);
    /// - then each of those by its primary key, in a lateral subquery that `OFFSET 0` keeps
    ///   apart, so no plan can scan a group's messages once for each of them, or once for
    ///   each of its members (estimated as one of each, a list in the bench's new group of
    ///   4,000 messages and 200 members took 46 s);
    /// - the groups the caller is a member of, and accepted, once, as an array (an
    ///   uncorrelated subquery runs before the rest) that each message is checked against.
    ///
    /// So a list's work is the caller's unconfirmed messages, each by its key and checked
    /// against the caller's groups, whatever the statistics say. The statistics can still
    /// choose how the caller's recipients and groups are found (by their index, or a scan
    /// when they look common), once a list.
    func messages(for recipient: [UInt8], in group: [UInt8]?, after cursor: Int64, limit: Int, now: UInt64) async throws -> [ListedMessage] {
        try await listed("""
            WITH r AS MATERIALIZED (SELECT message FROM relay_recipients WHERE signing_key = \(Data(recipient)) AND NOT confirmed)
            SELECT m.row, m.finished, m.group_id, m.id, m.size, m.expires, m.body_hash FROM r
            CROSS JOIN LATERAL (SELECT row, finished, group_id, id, size, expires, body_hash, ready FROM relay_messages
                                WHERE row = r.message OFFSET 0) m
            WHERE m.ready = 1 AND m.expires > \(Int64(now))
              AND m.finished > \(cursor) AND (\(group.map { Data($0) })::BYTEA IS NULL OR m.group_id = \(group.map { Data($0) }))
              AND (m.group_id = ANY (ARRAY(SELECT mb.group_id FROM relay_members mb
                                           JOIN relay_acceptances ac ON ac.group_id = mb.group_id AND ac.signing_key = mb.signing_key
                                           WHERE mb.signing_key = \(Data(recipient)) AND ac.accepted))
                   OR m.group_id = \(unescaped: Self.guestBox))
            ORDER BY m.finished LIMIT \(limit)
            """)
    }

    func message(group: [UInt8], id: [UInt8], for recipient: [UInt8], now: UInt64) async throws -> ListedMessage? {
        try await listed("""
            SELECT m.row, COALESCE(m.finished, 0), m.group_id, m.id, m.size, m.expires, m.body_hash FROM relay_messages m
            JOIN relay_recipients r ON r.message = m.row
            LEFT JOIN relay_members mb ON mb.group_id = m.group_id AND mb.signing_key = r.signing_key
            LEFT JOIN relay_acceptances ac ON ac.group_id = m.group_id AND ac.signing_key = r.signing_key AND ac.accepted
            WHERE m.group_id = \(Data(group)) AND m.id = \(Data(id)) AND r.signing_key = \(Data(recipient)) AND m.ready = 1
              AND m.expires > \(Int64(now)) AND \(unescaped: Self.memberFound)
            """).first
    }

    /// The guest box's id as an SQL literal, and what a member join must find (the guest
    /// box's messages are served with no group).
    static let guestBox = "decode('00000000000000000000000000000000', 'hex')"
    static let memberFound = "((mb.signing_key IS NOT NULL AND ac.signing_key IS NOT NULL) OR m.group_id = \(guestBox))"

    func guestMessages(from sender: [UInt8]?, to recipient: [UInt8]?, now: UInt64) async throws -> Int {
        let rows = try await client.query("""
            SELECT COUNT(DISTINCT m.row)::BIGINT FROM relay_messages m JOIN relay_recipients r ON r.message = m.row
            WHERE m.group_id = \(unescaped: Self.guestBox) AND NOT r.confirmed AND m.expires > \(Int64(now))
              AND (\(sender.map { Data($0) })::BYTEA IS NULL OR m.sender = \(sender.map { Data($0) }))
              AND (\(recipient.map { Data($0) })::BYTEA IS NULL OR r.signing_key = \(recipient.map { Data($0) }))
            """, logger: logger)
        for try await count in rows.decode(Int64.self) { return Int(count) }
        return 0
    }

    func isGuest(_ key: [UInt8], now: UInt64) async throws -> Bool {
        try await exists("""
            SELECT 1 WHERE EXISTS (SELECT 1 FROM relay_messages WHERE group_id = \(unescaped: Self.guestBox) AND sender = \(Data(key))
                                                               AND expires > \(Int64(now)))
                OR EXISTS (SELECT 1 FROM relay_messages m JOIN relay_recipients r ON r.message = m.row
                           WHERE m.group_id = \(unescaped: Self.guestBox) AND r.signing_key = \(Data(key)) AND m.expires > \(Int64(now)))
            """)
    }

    func chunk(_ index: Int, of message: Int64) async throws -> [UInt8]? {
        let rows = try await client.query("SELECT bytes FROM relay_chunks WHERE message = \(message) AND n = \(index)", logger: logger)
        for try await bytes in rows.decode(Data.self) { return [UInt8](bytes) }
        return nil
    }

    func confirm(group: [UInt8], id: [UInt8], by recipient: [UInt8], now: UInt64) async throws -> Bool {
        try await client.withTransaction(logger: logger) { db in
            var found: (Int64, Bool, Int64)?
            for try await row in try await db.query("""
                SELECT m.row, m.delete_when_confirmed, m.size FROM relay_messages m
                JOIN relay_recipients r ON r.message = m.row
                LEFT JOIN relay_members mb ON mb.group_id = m.group_id AND mb.signing_key = r.signing_key
                LEFT JOIN relay_acceptances ac ON ac.group_id = m.group_id AND ac.signing_key = r.signing_key AND ac.accepted
                WHERE m.group_id = \(Data(group)) AND m.id = \(Data(id)) AND r.signing_key = \(Data(recipient)) AND m.ready = 1
                  AND m.expires > \(Int64(now)) AND \(unescaped: Self.memberFound)
                FOR UPDATE OF m
                """, logger: logger).decode((Int64, Bool, Int64).self) { found = row }
            guard let (message, deleteWhenConfirmed, size) = found else { return false }
            try await db.query("UPDATE relay_recipients SET confirmed = TRUE WHERE message = \(message) AND signing_key = \(Data(recipient))",
                               logger: logger)
            var waiting = 0
            for try await count in try await db.query("""
                SELECT COUNT(*)::BIGINT FROM relay_recipients WHERE message = \(message) AND NOT confirmed
                """, logger: logger).decode(Int64.self) { waiting = Int(count) }
            if deleteWhenConfirmed && waiting == 0 {
                try await db.query("DELETE FROM relay_chunks WHERE message = \(message)", logger: logger)
                try await db.query("UPDATE relay_messages SET ready = 2 WHERE row = \(message)", logger: logger)
                // Content deleted on confirmation no longer counts against any quota.
                try await Self.count(db, -size, in: SQLiteRelayStore.scopes(group, owner: try await Self.owner(db, group, logger: logger)),
                                     logger: logger)
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
        try await client.withTransaction(logger: logger) { db in
            try await Self.deleteMessages(db, """
                DELETE FROM relay_messages WHERE group_id = \(Data(group)) AND id = \(Data(id)) AND sender = \(Data(sender))
                RETURNING group_id, size, ready
                """, logger: logger) > 0
        }
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
        try await client.query("DELETE FROM relay_invites WHERE expires <= \(Int64(now)) OR uses <= 0", logger: logger)
        try await client.withTransaction(logger: logger) { db in
            try await db.query("SELECT pg_advisory_xact_lock(\(Self.quotaLock))", logger: logger)
            try await Self.recount(db, logger: logger)
        }
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

    // MARK: Quotas

    /// Bytes counted against a scope: a group id (16 bytes, its messages), an owner key (32,
    /// the messages and records of its groups), or none (the relay's total).
    static func used(_ db: PostgresConnection, _ scope: [UInt8], logger: Logger) async throws -> UInt64 {
        for try await bytes in try await db.query("SELECT bytes FROM relay_usage WHERE scope = \(Data(scope))", logger: logger)
            .decode(Int64.self) { return UInt64(max(0, bytes)) }
        return 0
    }

    static func count(_ db: PostgresConnection, _ bytes: Int64, in scopes: [[UInt8]], logger: Logger) async throws {
        for scope in scopes {
            try await db.query("""
                INSERT INTO relay_usage (scope, bytes) VALUES (\(Data(scope)), \(bytes))
                ON CONFLICT (scope) DO UPDATE SET bytes = relay_usage.bytes + excluded.bytes
                """, logger: logger)
        }
    }

    static func owner(_ db: PostgresConnection, _ group: [UInt8], logger: Logger) async throws -> [UInt8] {
        for try await owner in try await db.query("SELECT owner FROM relay_groups WHERE id = \(Data(group))", logger: logger)
            .decode(Data.self) { return [UInt8](owner) }
        return []
    }

    /// Runs a `DELETE … RETURNING group_id, size, ready` of messages and takes what they
    /// counted off the quotas; returns how many it deleted.
    static func deleteMessages(_ db: PostgresConnection, _ query: PostgresQuery, logger: Logger) async throws -> Int {
        var deleted: [(Data, Int64, Int16)] = []
        for try await row in try await db.query(query, logger: logger).decode((Data, Int64, Int16).self) { deleted.append(row) }
        for (group, size, ready) in deleted where ready < 2 {
            try await count(db, -size, in: SQLiteRelayStore.scopes([UInt8](group), owner: try await owner(db, [UInt8](group), logger: logger)),
                            logger: logger)
        }
        return deleted.count
    }

    /// Counts every quota's usage again from the messages and records there are.
    static func recount(_ db: PostgresConnection, logger: Logger) async throws {
        try await db.query("DELETE FROM relay_usage", logger: logger)
        try await db.query("""
            INSERT INTO relay_usage (scope, bytes) SELECT group_id, SUM(size)::BIGINT FROM relay_messages WHERE ready < 2 GROUP BY group_id
            """, logger: logger)
        try await db.query("""
            INSERT INTO relay_usage (scope, bytes)
            SELECT owner, SUM(bytes)::BIGINT FROM (SELECT g.owner AS owner, m.size AS bytes FROM relay_messages m
                                                   JOIN relay_groups g ON g.id = m.group_id WHERE m.ready < 2
                                                   UNION ALL SELECT owner, length(record)::BIGINT FROM relay_groups) AS used GROUP BY owner
            """, logger: logger)
        try await db.query("""
            INSERT INTO relay_usage (scope, bytes) VALUES (''::BYTEA, (SELECT COALESCE(SUM(size), 0)::BIGINT FROM relay_messages WHERE ready < 2)
                                                                    + (SELECT COALESCE(SUM(length(record)), 0)::BIGINT FROM relay_groups))
            """, logger: logger)
    }
}
