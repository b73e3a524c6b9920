import Foundation
import GRDB

/// A share link this identity created, as the keystore keeps it: enough to list it and
/// delete it, never the link's key.
public struct KeptLink: Sendable {
    public let id: [UInt8]
    public let relayURL: String
    public let relayLabel: String
    public let kind: String
    public let size: UInt64
    public let views: Int
    public let createdAt: UInt64
    public let expiresAt: UInt64
    public let deleteToken: [UInt8]

    public init(id: [UInt8], relayURL: String, relayLabel: String, kind: String, size: UInt64, views: Int, createdAt: UInt64,
                expiresAt: UInt64, deleteToken: [UInt8]) {
        self.id = id
        self.relayURL = relayURL
        self.relayLabel = relayLabel
        self.kind = kind
        self.size = size
        self.views = views
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.deleteToken = deleteToken
    }
}

extension Keystore {
    /// Records a link just created.
    public func keepLink(_ link: KeptLink) throws(VaultError) {
        try write { db in
            try db.execute(sql: """
                INSERT INTO link_created (link_id, relay_url, relay_label, kind, size, views, created_at, expires_at, delete_token)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [Data(link.id), link.relayURL, link.relayLabel, link.kind, Int64(link.size), link.views,
                                 Int64(link.createdAt), Int64(link.expiresAt), Data(link.deleteToken)])
        }
    }

    /// The links this identity created that have not expired, newest first; expired ones
    /// are forgotten as they are read.
    public func keptLinks(now: UInt64) throws(VaultError) -> [KeptLink] {
        try write { db in
            try db.execute(sql: "DELETE FROM link_created WHERE expires_at <= ?", arguments: [Int64(now)])
            return try Row.fetchAll(db, sql: "SELECT * FROM link_created ORDER BY created_at DESC, link_id").map { row in
                KeptLink(id: [UInt8](row["link_id"] as Data), relayURL: row["relay_url"], relayLabel: row["relay_label"], kind: row["kind"],
                         size: UInt64(row["size"] as Int64), views: row["views"], createdAt: UInt64(row["created_at"] as Int64),
                         expiresAt: UInt64(row["expires_at"] as Int64), deleteToken: [UInt8](row["delete_token"] as Data))
            }
        }
    }

    /// Forgets a link (deleted, or found gone).
    public func forgetLink(id: [UInt8]) throws(VaultError) {
        try write { db in try db.execute(sql: "DELETE FROM link_created WHERE link_id = ?", arguments: [Data(id)]) }
    }
}
