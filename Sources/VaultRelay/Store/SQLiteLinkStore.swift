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

    func begin(link: NewLink, quota: UInt64, now: UInt64) async throws -> Int64? {
        try await pool.write { db in
            // One writer at a time: the quota check and the insert cannot interleave.
            let used = try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(size), 0) FROM links WHERE expires > ?", arguments: [Int64(now)]) ?? 0
            guard UInt64(used) + link.size <= quota else { return nil }
            try db.execute(sql: """
                INSERT INTO links (id, size, expires, views, iterations, claim_hash, delete_hash, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [Data(link.id), Int64(link.size), Int64(link.expires), link.views, link.iterations,
                                 Data(link.claimHash), Data(link.deleteHash), Int64(link.created)])
            return db.lastInsertedRowID
        }
    }

    func append(linkChunk: [UInt8], index: Int, to link: Int64) async throws {
        try await pool.write { db in
            try db.execute(sql: "INSERT INTO link_chunks (link, n, bytes) VALUES (?, ?, ?)", arguments: [link, index, Data(linkChunk)])
        }
    }

    func finish(link: Int64) async throws {
        try await pool.write { db in try db.execute(sql: "UPDATE links SET ready = 1 WHERE row = ?", arguments: [link]) }
    }

    func delete(link: Int64) async throws {
        try await pool.write { db in try db.execute(sql: "DELETE FROM links WHERE row = ?", arguments: [link]) }
    }

    func link(id: [UInt8], now: UInt64) async throws -> StoredLink? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: """
                SELECT row, size, expires, views, iterations, claim_hash, delete_hash FROM links
                WHERE id = ? AND ready = 1 AND views > 0 AND expires > ?
                """, arguments: [Data(id), Int64(now)]).map { row in
                StoredLink(row: row[0], size: UInt64(row[1] as Int64), expires: UInt64(row[2] as Int64), views: row[3], iterations: row[4],
                           claimHash: [UInt8](row[5] as Data), deleteHash: [UInt8](row[6] as Data))
            }
        }
    }

    func takeView(link: Int64, now: UInt64) async throws -> Int? {
        try await pool.write { db in
            // The one statement that decides: of two claims of the last view, only one
            // finds views > 0.
            try Int.fetchOne(db, sql: """
                UPDATE links SET views = views - 1 WHERE row = ? AND ready = 1 AND views > 0 AND expires > ? RETURNING views
                """, arguments: [link, Int64(now)])
        }
    }

    func linkChunk(_ index: Int, of link: Int64) async throws -> [UInt8]? {
        try await pool.read { db in
            try Data.fetchOne(db, sql: "SELECT bytes FROM link_chunks WHERE link = ? AND n = ?", arguments: [link, index]).map { [UInt8]($0) }
        }
    }
}
