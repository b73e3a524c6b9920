import Foundation
import PostgresNIO

/// Groups in PostgreSQL: records, the members they name and who accepted, and the owners
/// the operator invited (Docs/RELAY.md, "Joining a group", "Operator policy"). Logged
/// tables, as for the relay's identity: losing them would drop every group.
extension PostgresRelayStore {
    func group(id: [UInt8]) async throws -> StoredGroup? {
        let rows = try await client.query("SELECT id, version, owner, record FROM relay_groups WHERE id = \(Data(id))", logger: logger)
        for try await row in rows.decode((Data, Int64, Data, Data).self) { return Self.group(row) }
        return nil
    }

    func put(group: StoredGroup, ownerCard: [UInt8], members: [[UInt8]], limits: GroupLimits, now: UInt64) async throws -> GroupPut {
        try await client.withTransaction(logger: logger) { db in
            // Under the quota lock, one registration at a time across processes: whoever
            // registered the id first is its owner (L4), and records count against quotas.
            try await db.query("SELECT pg_advisory_xact_lock(\(Self.quotaLock))", logger: logger)
            let id = Data(group.id)
            let size = Int64(group.record.count)
            var grown = size
            var stored: (Int64, Data, Int64)?
            for try await row in try await db.query("SELECT version, owner, length(record)::BIGINT FROM relay_groups WHERE id = \(id) FOR UPDATE",
                                                    logger: logger).decode((Int64, Data, Int64).self) { stored = row }
            if let (version, owner, length) = stored {
                guard [UInt8](owner) == group.owner else { return .otherOwner }
                guard UInt64(version) < group.version else { return .stale }
                grown = size - length
            } else {
                var owned: Int64 = 0
                for try await count in try await db.query("SELECT COUNT(*)::BIGINT FROM relay_groups WHERE owner = \(Data(group.owner))",
                                                          logger: logger).decode(Int64.self) { owned = count }
                guard owned < Int64(limits.perOwner) else { return .tooManyGroups }
            }
            if grown > 0 {
                guard try await Self.used(db, group.owner, logger: logger) + UInt64(grown) <= limits.quotas.owner,
                      try await Self.used(db, [], logger: logger) + UInt64(grown) <= limits.quotas.total else { return .overQuota }
            }
            try await db.query("""
                INSERT INTO relay_groups (id, version, owner, record, owner_card)
                VALUES (\(id), \(Int64(group.version)), \(Data(group.owner)), \(Data(group.record)), \(Data(ownerCard)))
                ON CONFLICT (id) DO UPDATE SET version = excluded.version, record = excluded.record
                """, logger: logger)
            try await db.query("DELETE FROM relay_members WHERE group_id = \(id)", logger: logger)
            // One statement for all of them, as for a message's recipients: a round trip each
            // held the transaction, and the quota lock every registration takes, up to 255
            // times (a group's cap, FORMAT.md §16).
            try await db.query("INSERT INTO relay_members (group_id, signing_key) SELECT \(id), unnest(\(members.map { ByteBuffer(bytes: $0) }))",
                               logger: logger)
            // A member removed is asked again if it is ever added back; the owner's own
            // record is its acceptance.
            try await db.query("""
                DELETE FROM relay_acceptances WHERE group_id = \(id)
                  AND signing_key NOT IN (SELECT signing_key FROM relay_members WHERE group_id = \(id))
                """, logger: logger)
            try await db.query("""
                INSERT INTO relay_acceptances (group_id, signing_key, accepted) VALUES (\(id), \(Data(group.owner)), TRUE)
                ON CONFLICT (group_id, signing_key) DO UPDATE SET accepted = TRUE
                """, logger: logger)
            try await Self.count(db, grown, in: [group.owner, []], logger: logger)
            return .stored
        }
    }

    func groups(member: [UInt8]) async throws -> [StoredGroup] {
        let rows = try await client.query("""
            SELECT g.id, g.version, g.owner, g.record FROM relay_groups g
            JOIN relay_members m ON m.group_id = g.id
            JOIN relay_acceptances a ON a.group_id = g.id AND a.signing_key = m.signing_key AND a.accepted
            WHERE m.signing_key = \(Data(member)) ORDER BY g.id
            """, logger: logger)
        var groups: [StoredGroup] = []
        for try await row in rows.decode((Data, Int64, Data, Data).self) { groups.append(Self.group(row)) }
        return groups
    }

    func invitations(member: [UInt8], limit: Int) async throws -> [Invitation] {
        let rows = try await client.query("""
            SELECT g.id, g.version, g.owner_card FROM relay_groups g JOIN relay_members m ON m.group_id = g.id
            WHERE m.signing_key = \(Data(member)) AND g.owner_card IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM relay_acceptances a WHERE a.group_id = g.id AND a.signing_key = m.signing_key)
            ORDER BY g.registered LIMIT \(limit)
            """, logger: logger)
        var invitations: [Invitation] = []
        for try await (id, version, card) in rows.decode((Data, Int64, Data).self) {
            invitations.append(Invitation(group: [UInt8](id), version: UInt64(version), ownerCard: [UInt8](card)))
        }
        return invitations
    }

    func answer(group: [UInt8], member: [UInt8], owner: [UInt8], accepted: Bool) async throws -> GroupAnswer {
        try await client.withTransaction(logger: logger) { db in
            var stored: Data?
            for try await owner in try await db.query("SELECT owner FROM relay_groups WHERE id = \(Data(group)) FOR SHARE", logger: logger)
                .decode(Data.self) { stored = owner }
            guard let stored else { return .unknownGroup }
            guard [UInt8](stored) == owner else { return .otherOwner }
            var named = false
            for try await _ in try await db.query("""
                SELECT 1 FROM relay_members WHERE group_id = \(Data(group)) AND signing_key = \(Data(member))
                """, logger: logger) { named = true }
            guard named else { return .notNamed }
            try await db.query("""
                INSERT INTO relay_acceptances (group_id, signing_key, accepted) VALUES (\(Data(group)), \(Data(member)), \(accepted))
                ON CONFLICT (group_id, signing_key) DO UPDATE SET accepted = excluded.accepted
                """, logger: logger)
            return .recorded
        }
    }

    func isNamed(_ key: [UInt8], in group: [UInt8]) async throws -> Bool {
        try await exists("SELECT 1 FROM relay_members WHERE group_id = \(Data(group)) AND signing_key = \(Data(key))")
    }

    func isMember(_ key: [UInt8], of group: [UInt8]) async throws -> Bool {
        try await exists("""
            SELECT 1 FROM relay_members m
            JOIN relay_acceptances a ON a.group_id = m.group_id AND a.signing_key = m.signing_key AND a.accepted
            WHERE m.group_id = \(Data(group)) AND m.signing_key = \(Data(key))
            """)
    }

    func isMember(_ key: [UInt8]) async throws -> Bool {
        try await exists("""
            SELECT 1 FROM relay_members m
            JOIN relay_acceptances a ON a.group_id = m.group_id AND a.signing_key = m.signing_key AND a.accepted
            WHERE m.signing_key = \(Data(key)) LIMIT 1
            """)
    }

    func isInvitedOwner(_ key: [UInt8]) async throws -> Bool {
        try await exists("SELECT 1 FROM relay_invited_owners WHERE signing_key = \(Data(key))")
    }

    func addInvite(hash: [UInt8], uses: Int, expires: UInt64, now: UInt64) async throws {
        try await client.query("""
            INSERT INTO relay_invites (hash, uses, expires, created) VALUES (\(Data(hash)), \(Int32(uses)), \(Int64(expires)), \(Int64(now)))
            """, logger: logger)
    }

    func redeem(invite hash: [UInt8], for key: [UInt8], now: UInt64) async throws -> Bool {
        try await client.withTransaction(logger: logger) { db in
            for try await _ in try await db.query("SELECT 1 FROM relay_invited_owners WHERE signing_key = \(Data(key))", logger: logger) {
                return true
            }
            // One statement takes the use; PostgreSQL's row lock orders two redemptions of
            // an invite's last use, and the second finds none.
            var taken = false
            for try await _ in try await db.query("""
                UPDATE relay_invites SET uses = uses - 1 WHERE hash = \(Data(hash)) AND uses > 0 AND expires > \(Int64(now)) RETURNING 1
                """, logger: logger) { taken = true }
            guard taken else { return false }
            try await db.query("""
                INSERT INTO relay_invited_owners (signing_key, invited) VALUES (\(Data(key)), \(Int64(now))) ON CONFLICT DO NOTHING
                """, logger: logger)
            return true
        }
    }

    func addressSecret(create: @Sendable () -> [UInt8]) async throws -> [UInt8] {
        try await secret(in: "relay_address_secret", create: create)
    }

    private static func group(_ row: (Data, Int64, Data, Data)) -> StoredGroup {
        StoredGroup(id: [UInt8](row.0), version: UInt64(row.1), owner: [UInt8](row.2), record: [UInt8](row.3))
    }
}
