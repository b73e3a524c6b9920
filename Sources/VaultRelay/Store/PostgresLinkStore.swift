import Foundation
import PostgresNIO

/// Share links in PostgreSQL (``LinkStore``): UNLOGGED tables, as for messages, so no copy
/// of a link's content is written to the WAL (and the links are lost on a crash).
extension PostgresRelayStore {
    static let linkSchema = [
        """
        CREATE UNLOGGED TABLE IF NOT EXISTS relay_links (
            row BIGSERIAL PRIMARY KEY, id BYTEA NOT NULL UNIQUE, size BIGINT NOT NULL, expires BIGINT NOT NULL, views INTEGER NOT NULL,
            iterations INTEGER NOT NULL, claim_hash BYTEA NOT NULL, delete_hash BYTEA NOT NULL, ready SMALLINT NOT NULL DEFAULT 0,
            created BIGINT NOT NULL)
        """,
        "CREATE INDEX IF NOT EXISTS relay_links_by_expiry ON relay_links(expires)",
        """
        CREATE UNLOGGED TABLE IF NOT EXISTS relay_link_chunks (
            link BIGINT NOT NULL REFERENCES relay_links(row) ON DELETE CASCADE, n INTEGER NOT NULL, bytes BYTEA NOT NULL,
            PRIMARY KEY (link, n))
        """,
    ]

    /// The advisory lock that makes the links' quota check and insert one step across processes.
    private static let linkQuotaLock: Int64 = 7781

    func begin(link: NewLink, quota: UInt64, perSource: SourceQuota, now: UInt64) async throws -> LinkBegin {
        try await client.withTransaction(logger: logger) { db in
            try await db.query("SELECT pg_advisory_xact_lock(\(Self.linkQuotaLock))", logger: logger)
            var used: Int64 = 0
            for try await sum in try await db.query("SELECT COALESCE(SUM(size), 0)::BIGINT FROM relay_links WHERE expires > \(Int64(now))",
                                                    logger: logger).decode(Int64.self) { used = sum }
            guard UInt64(used) + link.size <= quota else { return .overQuota }
            if let source = link.source {
                var count: Int64 = 0, bytes: Int64 = 0
                for try await (links, sum) in try await db.query("""
                    SELECT COUNT(*)::BIGINT, COALESCE(SUM(size), 0)::BIGINT FROM relay_links WHERE source = \(Data(source)) AND expires > \(Int64(now))
                    """, logger: logger).decode((Int64, Int64).self) { (count, bytes) = (links, sum) }
                guard count < Int64(perSource.count), UInt64(bytes) + link.size <= perSource.bytes else { return .overSourceQuota }
            }
            for try await row in try await db.query("""
                INSERT INTO relay_links (id, size, expires, views, iterations, claim_hash, delete_hash, created, source)
                VALUES (\(Data(link.id)), \(Int64(link.size)), \(Int64(link.expires)), \(Int32(link.views)), \(Int32(link.iterations)),
                        \(Data(link.claimHash)), \(Data(link.deleteHash)), \(Int64(link.created)), \(link.source.map { Data($0) }))
                RETURNING row
                """, logger: logger).decode(Int64.self) { return .started(row) }
            throw RelayStartFailure("a link could not be stored")
        }
    }

    func spendAttempt(link id: [UInt8], now: UInt64, burst: UInt64, interval: UInt64) async throws -> AttemptSpent {
        let (now, interval, window, seconds) = (Int64(now), Int64(interval), Int64(burst * interval), Int64(now / 1000))
        // One statement: PostgreSQL's row lock orders concurrent attempts, from any process,
        // and each sees the allowance the one before it left.
        let spent = try await exists("""
            UPDATE relay_links SET attempts_full = GREATEST(attempts_full, \(now)) + \(interval)
            WHERE id = \(Data(id)) AND ready = 1 AND views > 0 AND expires > \(seconds)
              AND GREATEST(attempts_full, \(now)) + \(interval) - \(now) <= \(window)
            RETURNING 1
            """)
        if spent { return .spent }
        let served = try await exists("SELECT 1 FROM relay_links WHERE id = \(Data(id)) AND ready = 1 AND views > 0 AND expires > \(seconds)")
        return served ? .exhausted : .gone
    }

    func refundAttempt(link row: Int64, interval: UInt64) async throws {
        try await client.query("UPDATE relay_links SET attempts_full = GREATEST(attempts_full - \(Int64(interval)), 0) WHERE row = \(row)",
                               logger: logger)
    }

    func append(linkChunk: [UInt8], index: Int, to link: Int64) async throws {
        try await client.query("INSERT INTO relay_link_chunks (link, n, bytes) VALUES (\(link), \(index), \(Data(linkChunk)))", logger: logger)
    }

    func finish(link: Int64) async throws {
        try await client.query("UPDATE relay_links SET ready = 1 WHERE row = \(link)", logger: logger)
    }

    func delete(link: Int64) async throws {
        try await client.query("DELETE FROM relay_links WHERE row = \(link)", logger: logger)
    }

    func link(id: [UInt8], now: UInt64) async throws -> StoredLink? {
        for try await (row, size, expires, views, iterations, claim, delete) in try await client.query("""
            SELECT row, size, expires, views, iterations, claim_hash, delete_hash FROM relay_links
            WHERE id = \(Data(id)) AND ready = 1 AND views > 0 AND expires > \(Int64(now))
            """, logger: logger).decode((Int64, Int64, Int64, Int32, Int32, Data, Data).self) {
            return StoredLink(row: row, size: UInt64(size), expires: UInt64(expires), views: Int(views), iterations: Int(iterations),
                              claimHash: [UInt8](claim), deleteHash: [UInt8](delete))
        }
        return nil
    }

    func takeView(link: Int64, now: UInt64) async throws -> Int? {
        // One statement, so PostgreSQL's row lock orders concurrent claims: the second
        // re-reads the row after the first commits and finds no view left.
        for try await views in try await client.query("""
            UPDATE relay_links SET views = views - 1 WHERE row = \(link) AND ready = 1 AND views > 0 AND expires > \(Int64(now)) RETURNING views
            """, logger: logger).decode(Int32.self) { return Int(views) }
        return nil
    }

    func linkChunk(_ index: Int, of link: Int64) async throws -> [UInt8]? {
        for try await bytes in try await client.query("SELECT bytes FROM relay_link_chunks WHERE link = \(link) AND n = \(index)",
                                                      logger: logger).decode(Data.self) { return [UInt8](bytes) }
        return nil
    }
}
