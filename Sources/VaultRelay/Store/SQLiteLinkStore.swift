import Foundation
import GRDB

/// Share links in the embedded store (``LinkStore``), with `secure_delete` and the sweep's
/// log checkpoint as for messages.
extension SQLiteRelayStore {
    static func createLinkTables(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE links (row INTEGER PRIMARY KEY AUTOINCREMENT, id BLOB NOT NULL UNIQUE, size INTEGER NOT NULL,
                                expires INTEGER NOT NULL, views INTEGER NOT NULL, iterations INTEGER NOT NULL,
                                claim_hash BLOB NOT NULL, delete_hash BLOB NOT NULL,
                                ready INTEGER NOT NULL DEFAULT 0, created INTEGER NOT NULL);
            CREATE INDEX links_by_expiry ON links(expires);
            CREATE TABLE link_chunks (link INTEGER NOT NULL REFERENCES links(row) ON DELETE CASCADE, n INTEGER NOT NULL,
                                      bytes BLOB NOT NULL, PRIMARY KEY (link, n));
            """)
    }

    func begin(link: NewLink, quota: UInt64, perSource: SourceQuota, now: UInt64) async throws -> LinkBegin {
        try await pool.write { db in
            // One writer at a time: the quota checks and the insert cannot interleave.
            let used = try Int64.fetchOne(db.cachedStatement(sql: "SELECT COALESCE(SUM(size), 0) FROM links WHERE expires > ?"),
                arguments: [Int64(now)]) ?? 0
            guard UInt64(used) + link.size <= quota else { return .overQuota }
            if let source = link.source {
                let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM links WHERE source = ? AND expires > ?"),
                                           arguments: [Data(source), Int64(now)])
                let (count, bytes) = (row?[0] as Int? ?? 0, row?[1] as Int64? ?? 0)
                guard count < perSource.count, UInt64(bytes) + link.size <= perSource.bytes else { return .overSourceQuota }
            }
            try db.cachedStatement(sql: """
                INSERT INTO links (id, size, expires, views, iterations, claim_hash, delete_hash, created, source)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """).execute(arguments: [Data(link.id), Int64(link.size), Int64(link.expires), link.views, link.iterations,
                                 Data(link.claimHash), Data(link.deleteHash), Int64(link.created), link.source.map { Data($0) }])
            return .started(db.lastInsertedRowID)
        }
    }

    func spendAttempt(link id: [UInt8], now: UInt64, burst: UInt64, interval: UInt64) async throws -> AttemptSpent {
        try await pool.write { db in
            try db.cachedStatement(sql: """
                UPDATE links SET attempts_full = MAX(attempts_full, :now) + :interval
                WHERE id = :id AND ready = 1 AND views > 0 AND expires > :seconds AND MAX(attempts_full, :now) + :interval - :now <= :window
                """).execute(arguments: ["now": Int64(now), "interval": Int64(interval), "id": Data(id), "seconds": Int64(now / 1000),
                                 "window": Int64(burst * interval)])
            if db.changesCount == 1 { return .spent }
            let served = try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM links WHERE id = ? AND ready = 1 AND views > 0 AND expires > ?"),
                                           arguments: [Data(id), Int64(now / 1000)]) ?? false
            return served ? .exhausted : .gone
        }
    }

    func refundAttempt(link row: Int64, interval: UInt64) async throws {
        try await pool.write { db in
            try db.cachedStatement(sql: "UPDATE links SET attempts_full = MAX(attempts_full - ?, 0) WHERE row = ?")
                .execute(arguments: [Int64(interval), row])
        }
    }

    func append(linkChunk: [UInt8], index: Int, to link: Int64) async throws {
        try await pool.write { db in
            try db.cachedStatement(sql: "INSERT INTO link_chunks (link, n, bytes) VALUES (?, ?, ?)")
                .execute(arguments: [link, index, Data(linkChunk)])
        }
    }

    func finish(link: Int64) async throws {
        try await pool.write { db in try db.cachedStatement(sql: "UPDATE links SET ready = 1 WHERE row = ?").execute(arguments: [link]) }
    }

    func delete(link: Int64) async throws {
        try await pool.write { db in try db.cachedStatement(sql: "DELETE FROM links WHERE row = ?").execute(arguments: [link]) }
    }

    func link(id: [UInt8], now: UInt64) async throws -> StoredLink? {
        try await read { db in
            try Row.fetchOne(db.cachedStatement(sql: """
                SELECT row, size, expires, views, iterations, claim_hash, delete_hash FROM links
                WHERE id = ? AND ready = 1 AND views > 0 AND expires > ?
                """), arguments: [Data(id), Int64(now)]).map { row in
                StoredLink(row: row[0], size: UInt64(row[1] as Int64), expires: UInt64(row[2] as Int64), views: row[3], iterations: row[4],
                           claimHash: [UInt8](row[5] as Data), deleteHash: [UInt8](row[6] as Data))
            }
        }
    }

    func takeView(link: Int64, now: UInt64) async throws -> Int? {
        try await pool.write { db in
            // The one statement that decides: of two claims of the last view, only one
            // finds views > 0.
            try Int.fetchOne(db.cachedStatement(sql: """
                UPDATE links SET views = views - 1 WHERE row = ? AND ready = 1 AND views > 0 AND expires > ? RETURNING views
                """), arguments: [link, Int64(now)])
        }
    }

    func linkChunk(_ index: Int, of link: Int64) async throws -> [UInt8]? {
        try await read { db in
            try Data.fetchOne(db.cachedStatement(sql: "SELECT bytes FROM link_chunks WHERE link = ? AND n = ?"),
                arguments: [link, index]).map { [UInt8]($0) }
        }
    }
}
