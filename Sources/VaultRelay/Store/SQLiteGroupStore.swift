import Foundation
import GRDB

/// Groups in the embedded store: records, the members they name and who accepted, and the
/// owners the operator invited (Docs/RELAY.md, "Joining a group", "Operator policy").
extension SQLiteRelayStore {
    func group(id: [UInt8]) async throws -> StoredGroup? {
        try await read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT id, version, owner, record FROM groups WHERE id = ?"), arguments: [Data(id)])
                .map(Self.group)
        }
    }

    func put(group: StoredGroup, ownerCard: [UInt8], members: [[UInt8]], limits: GroupLimits, now: UInt64) async throws -> GroupPut {
        try await pool.write { db in
            // One writer at a time: whoever registered the id first is its owner, whatever
            // the order of the checks that came before this transaction (L4).
            let id = Data(group.id)
            let size = Int64(group.record.count)
            var grown = size
            if let stored = try Row.fetchOne(db.cachedStatement(sql: "SELECT version, owner, length(record) FROM groups WHERE id = ?"),
                arguments: [id]) {
                guard [UInt8](stored[1] as Data) == group.owner else { return .otherOwner }
                guard UInt64(stored[0] as Int64) < group.version else { return .stale }
                grown = size - (stored[2] as Int64)
            } else {
                let owned = try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM groups WHERE owner = ?"),
                    arguments: [Data(group.owner)]) ?? 0
                guard owned < limits.perOwner else { return .tooManyGroups }
            }
            if grown > 0 {
                guard try Self.used(db, group.owner) + UInt64(grown) <= limits.quotas.owner,
                      try Self.used(db, []) + UInt64(grown) <= limits.quotas.total else { return .overQuota }
            }
            try db.cachedStatement(sql: """
                INSERT INTO groups (id, version, owner, record, owner_card) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET version = excluded.version, record = excluded.record
                """).execute(arguments: [id, Int64(group.version), Data(group.owner), Data(group.record), Data(ownerCard)])
            try db.cachedStatement(sql: "DELETE FROM members WHERE group_id = ?").execute(arguments: [id])
            for member in members {
                try db.cachedStatement(sql: "INSERT INTO members (group_id, signing_key) VALUES (?, ?)").execute(arguments: [id, Data(member)])
            }
            // A member removed is asked again if it is ever added back; the owner's own
            // record is its acceptance.
            try db.cachedStatement(sql: "DELETE FROM acceptances WHERE group_id = ? AND signing_key NOT IN (SELECT signing_key FROM members WHERE group_id = ?)")
                .execute(arguments: [id, id])
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO acceptances (group_id, signing_key, accepted) VALUES (?, ?, 1)")
                .execute(arguments: [id, Data(group.owner)])
            try Self.count(db, grown, in: [group.owner, []])
            return .stored
        }
    }

    func groups(member: [UInt8]) async throws -> [StoredGroup] {
        try await read { db in
            try Row.fetchAll(db.cachedStatement(sql: """
                SELECT g.id, g.version, g.owner, g.record FROM groups g
                JOIN members m ON m.group_id = g.id
                JOIN acceptances a ON a.group_id = g.id AND a.signing_key = m.signing_key AND a.accepted = 1
                WHERE m.signing_key = ? ORDER BY g.id
                """), arguments: [Data(member)]).map(Self.group)
        }
    }

    func invitations(member: [UInt8], limit: Int) async throws -> [Invitation] {
        try await read { db in
            try Row.fetchAll(db.cachedStatement(sql: """
                SELECT g.id, g.version, g.owner_card FROM groups g JOIN members m ON m.group_id = g.id
                WHERE m.signing_key = ? AND g.owner_card IS NOT NULL AND NOT EXISTS (SELECT 1 FROM acceptances a WHERE a.group_id = g.id AND a.signing_key = m.signing_key)
                ORDER BY g.rowid LIMIT ?
                """), arguments: [Data(member), limit]).map { row in
                Invitation(group: Self.bytes(row, 0), version: UInt64(row[1] as Int64), ownerCard: Self.bytes(row, 2))
            }
        }
    }

    func answer(group: [UInt8], member: [UInt8], owner: [UInt8], accepted: Bool) async throws -> GroupAnswer {
        try await pool.write { db in
            guard let stored = try Data.fetchOne(db.cachedStatement(sql: "SELECT owner FROM groups WHERE id = ?"), arguments: [Data(group)]) else {
                return .unknownGroup
            }
            guard [UInt8](stored) == owner else { return .otherOwner }
            guard try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM members WHERE group_id = ? AND signing_key = ?"),
                                    arguments: [Data(group), Data(member)]) ?? false else { return .notNamed }
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO acceptances (group_id, signing_key, accepted) VALUES (?, ?, ?)")
                .execute(arguments: [Data(group), Data(member), accepted])
            return .recorded
        }
    }

    func isNamed(_ key: [UInt8], in group: [UInt8]) async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM members WHERE group_id = ? AND signing_key = ?"),
                              arguments: [Data(group), Data(key)]) ?? false
        }
    }

    func isMember(_ key: [UInt8], of group: [UInt8]) async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(db.cachedStatement(sql: """
                SELECT 1 FROM members m JOIN acceptances a ON a.group_id = m.group_id AND a.signing_key = m.signing_key AND a.accepted = 1
                WHERE m.group_id = ? AND m.signing_key = ?
                """), arguments: [Data(group), Data(key)]) ?? false
        }
    }

    func isMember(_ key: [UInt8]) async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(db.cachedStatement(sql: """
                SELECT 1 FROM members m JOIN acceptances a ON a.group_id = m.group_id AND a.signing_key = m.signing_key AND a.accepted = 1
                WHERE m.signing_key = ? LIMIT 1
                """), arguments: [Data(key)]) ?? false
        }
    }

    func isInvitedOwner(_ key: [UInt8]) async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM invited_owners WHERE signing_key = ?"), arguments: [Data(key)]) ?? false
        }
    }

    func addInvite(hash: [UInt8], uses: Int, expires: UInt64, now: UInt64) async throws {
        try await pool.write { db in
            try db.cachedStatement(sql: "INSERT INTO invites (hash, uses, expires, created) VALUES (?, ?, ?, ?)")
                .execute(arguments: [Data(hash), uses, Int64(expires), Int64(now)])
        }
    }

    func redeem(invite hash: [UInt8], for key: [UInt8], now: UInt64) async throws -> Bool {
        try await pool.write { db in
            if try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM invited_owners WHERE signing_key = ?"),
                arguments: [Data(key)]) ?? false { return true }
            // One statement takes the use: two redemptions of an invite's last use cannot
            // both find it.
            try db.cachedStatement(sql: "UPDATE invites SET uses = uses - 1 WHERE hash = ? AND uses > 0 AND expires > ?")
                .execute(arguments: [Data(hash), Int64(now)])
            guard db.changesCount == 1 else { return false }
            try db.cachedStatement(sql: "INSERT INTO invited_owners (signing_key, invited) VALUES (?, ?)").execute(arguments: [Data(key), Int64(now)])
            return true
        }
    }

    func addressSecret(create: @Sendable () -> [UInt8]) async throws -> [UInt8] {
        try await secret(in: "address_secret", create: create)
    }

    private static func group(_ row: Row) -> StoredGroup {
        StoredGroup(id: bytes(row, 0), version: UInt64(row[1] as Int64), owner: bytes(row, 2), record: bytes(row, 3))
    }
}
