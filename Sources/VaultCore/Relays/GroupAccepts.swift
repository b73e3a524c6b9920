import Foundation
import GRDB

/// A relay of a kept group that could not be told of this identity's acceptance (down, or
/// busy, when the group was taken or joined again): asked again at every receive until it
/// takes it (Docs/RELAY.md, "Joining a group").
///
/// Most such relays need no list: one that never heard of this identity lists the group as
/// an invitation still, and the next receive accepts it there. But one that was told of a
/// leave keeps that decline, and lists neither the group nor an invitation, so after a join
/// nothing else would ever ask it again (issue 37's follow-up).
public struct PendingAccept: Sendable, Equatable {
    /// The group, as this identity keeps it now.
    public let record: GroupRecord
    /// The relay still to be told, as that record names it.
    public let relay: GroupRecord.Relay
}

extension Keystore {
    /// Remembers `relays` of group `id` as still to accept it. A relay already remembered
    /// stays once.
    public func remember(accepting id: [UInt8], at relays: [KeyCard]) throws(VaultError) {
        guard !relays.isEmpty else { return }
        try write { db in
            for relay in relays {
                try db.execute(sql: "INSERT OR IGNORE INTO group_accepts (group_id, relay_card) VALUES (?, ?)",
                               arguments: [Data(id), Data(relay.encoded)])
            }
        }
    }

    /// The acceptances still to make, each with the group as kept now. A row whose group is
    /// no longer kept (left, forgotten) or whose relay the kept record no longer names (a
    /// newer version dropped it) is dropped here: only a relay of a kept group is ever asked,
    /// so the list cannot grow past the relays of the groups this identity holds: at most
    /// one request a run for each kept group at a relay that each receive lists anyway.
    public func pendingAccepts() throws(VaultError) -> [PendingAccept] {
        try write { db in
            var pending: [PendingAccept] = []
            var records: [[UInt8]: GroupRecord?] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT group_id, relay_card FROM group_accepts ORDER BY group_id, relay_card") {
                let id = [UInt8](row["group_id"] as Data), card = [UInt8](row["relay_card"] as Data)
                if records[id] == nil {
                    records[id] = try Data.fetchOne(db, sql: "SELECT record FROM relay_group WHERE id = ?", arguments: [Data(id)])
                        .map { try GroupRecord(parsing: [UInt8]($0)) }
                }
                guard let record = records[id] ?? nil, let relay = record.relays.first(where: { $0.card.encoded == card }) else {
                    try db.execute(sql: "DELETE FROM group_accepts WHERE group_id = ? AND relay_card = ?", arguments: [Data(id), Data(card)])
                    continue
                }
                pending.append(PendingAccept(record: record, relay: relay))
            }
            return pending
        }
    }

    /// `relay` took this identity's acceptance of group `id` (or has nothing of it to accept).
    /// Should the group be left by now (a leave in another process, whose decline may have
    /// reached the relay before this acceptance), the relay is marked as still to be told of
    /// the leave (``pendingDeclines()``), so the next receive declines it there again.
    public func accepted(group id: [UInt8], at relay: KeyCard) throws(VaultError) {
        try write { db in
            try db.execute(sql: "DELETE FROM group_accepts WHERE group_id = ? AND relay_card = ?", arguments: [Data(id), Data(relay.encoded)])
            try db.execute(sql: """
                UPDATE group_declines SET told = 0 WHERE group_id = ? AND relay_card = ? AND NOT EXISTS (SELECT 1 FROM relay_group WHERE id = ?)
                """, arguments: [Data(id), Data(relay.encoded), Data(id)])
        }
    }
}
