import VaultCore
import Foundation
import GRDB

/// Where one holder's share of a secret this identity dealt went: what `vault secrets show`
/// lists for the dealer.
public struct ShareDelivery: Sendable {
    /// The states, in the order a delivery usually passes them.
    public enum State: String, Sendable {
        /// The bundle waits in the outbox (`vault secrets push`).
        case notYetReached = "not yet reached"
        /// Stored on the group's relays; the holder has not answered yet.
        case sent
        /// The holder's person is asked whether to keep it.
        case waitingForConsent = "waiting for consent"
        /// The holder stored it.
        case delivered
        /// The holder (or its person) refused it.
        case refused
    }

    public let holderKey: [UInt8]
    public let holderLabel: String
    public let state: State
    /// How: "LAN 192.168.1.21:7733", "relays of team", "file".
    public let via: String
    public let updated: Date
}

extension Keystore {
    /// Records where holder `holder`'s share of the secret at `secretRow` stands.
    public func setDelivery(secretRow: [UInt8], holderKey: [UInt8], label: String, state: ShareDelivery.State, via: String,
                            now: Date = VaultClock.now()) throws(VaultError) {
        try write { db in
            try db.execute(sql: """
                INSERT INTO share_delivery (secret_row, holder_key, holder_label, state, via, updated_at) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (secret_row, holder_key) DO UPDATE SET state = excluded.state, via = excluded.via, updated_at = excluded.updated_at
                """, arguments: [Data(secretRow), Data(holderKey), label, state.rawValue, via, Int64(now.timeIntervalSince1970)])
        }
    }

    /// A holder's answer through relays: it changes a delivery that is under way only, so a
    /// late or replayed "waiting" never hides a "delivered".
    public func answerDelivery(secretRow: [UInt8], holderKey: [UInt8], state: ShareDelivery.State, now: Date = VaultClock.now()) throws(VaultError) -> Bool {
        try write { db in
            try db.execute(sql: """
                UPDATE share_delivery SET state = ?, updated_at = ?
                WHERE secret_row = ? AND holder_key = ? AND state IN ('sent', 'waiting for consent', 'not yet reached')
                """, arguments: [state.rawValue, Int64(now.timeIntervalSince1970), Data(secretRow), Data(holderKey)])
            return db.changesCount > 0
        }
    }

    /// Every holder's delivery of the secret at `secretRow`, by label.
    public func deliveries(secretRow: [UInt8]) throws(VaultError) -> [ShareDelivery] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM share_delivery WHERE secret_row = ? ORDER BY holder_label", arguments: [Data(secretRow)])
                .map { row in
                    ShareDelivery(holderKey: [UInt8](row["holder_key"] as Data), holderLabel: row["holder_label"],
                                  state: ShareDelivery.State(rawValue: row["state"]) ?? .notYetReached, via: row["via"],
                                  updated: Date(timeIntervalSince1970: TimeInterval(row["updated_at"] as Int64)))
                }
        }
    }
}
