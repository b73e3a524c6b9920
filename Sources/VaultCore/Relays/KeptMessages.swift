import Foundation
import GRDB

/// Holder messages this keystore leaves unconfirmed on the relays: a relay lists a message
/// to a key until that key confirms it, so what one machine of an identity leaves there
/// reaches the identity's other machines too (a dealer's notices of emergency requests,
/// which its every machine must be able to deny). Each is taken once here all the same.
extension Keystore {
    /// Records that message `id` stays unconfirmed until `until` (Unix seconds).
    public func keepUnconfirmed(message id: [UInt8], until: UInt64) throws(VaultError) {
        try write { db in
            try db.execute(sql: "INSERT OR IGNORE INTO message_kept (message_id, until_at) VALUES (?, ?)",
                           arguments: [Data(id), Int64(min(until, UInt64(Int64.max)))])
            try db.execute(sql: "DELETE FROM message_kept WHERE until_at <= ?", arguments: [Int64(VaultClock.now().timeIntervalSince1970)])
        }
    }

    /// Whether message `id` is left unconfirmed on purpose.
    public func isKeptUnconfirmed(message id: [UInt8]) throws(VaultError) -> Bool {
        try read { db in try Bool.fetchOne(db, sql: "SELECT 1 FROM message_kept WHERE message_id = ?", arguments: [Data(id)]) ?? false }
    }
}
