import Foundation
import GRDB

/// A group record this identity refused (Docs/RELAY.md, "Joining a group"): remembered so
/// that a relay that lists it again costs no request and prints no warning.
public struct GroupRefusal: Sendable, Equatable {
    /// Why it was refused.
    public enum Reason: String, Sendable {
        /// Its owner was not this identity or a trusted peer. Asked about again once it is.
        case untrusted
        /// Its owner's record (it verified, and is of the id and owner listed) was not one to
        /// take (it did not name this identity, or was older than the one left). Fetched
        /// again, from any relay, only at a higher version.
        case invalid
        /// The relay served bytes that are not the listed owner's record of the id (they did
        /// not parse or verify, or were another id's or another owner's): the relay's doing,
        /// so the refusal holds at that relay only, up to the version it listed.
        case damaged
        /// This identity left it (`vault group leave`). Declined at every relay that lists
        /// it, at any version, until this identity joins it again (`vault group join`).
        case left
    }

    /// The group's id.
    public let group: [UInt8]
    /// Its owner's Ed25519 key, as the relay listed it.
    public let owner: [UInt8]
    /// The version refused.
    public let version: UInt64
    /// Why.
    public let reason: Reason
    /// A relay that listed it, to fetch the record from should the owner be trusted later.
    public let relayURL: String
    /// That relay's card.
    public let relayCard: KeyCard

    /// A refusal.
    public init(group: [UInt8], owner: [UInt8], version: UInt64, reason: Reason, relayURL: String, relayCard: KeyCard) {
        self.group = group
        self.owner = owner
        self.version = version
        self.reason = reason
        self.relayURL = relayURL
        self.relayCard = relayCard
    }

    /// Whether this refusal keeps out a record listed at `version` by the relay `relay`: one
    /// found not valid, up to its version, at every relay; a relay's damage, up to the
    /// version that relay listed, at that relay only. Other reasons are the caller's to judge
    /// (an untrusted owner may be trusted since; a leave is undone only by a join).
    public func covers(version: UInt64, at relay: KeyCard) -> Bool {
        // Versions are kept as SQLite integers, so one listed above 2^63 - 1 was kept as
        // that; no record has such a version (FORMAT.md §16), so it is refused with it.
        let version = min(version, UInt64(Int64.max))
        return switch reason {
        case .invalid: version <= self.version
        case .damaged: relay == relayCard && version <= self.version
        case .untrusted, .left: false
        }
    }
}

/// A relay of a group this identity left that has not been told yet: it still lists the
/// group to this identity, and is asked to decline it at every receive until it does.
public struct PendingDecline: Sendable, Equatable {
    /// The group's id.
    public let group: [UInt8]
    /// Its owner's Ed25519 key.
    public let owner: [UInt8]
    /// The relay, as the group's record named it.
    public let relay: GroupRecord.Relay
}

extension Keystore {
    /// At most this many refusals are kept; the oldest go first. A relay can list many
    /// groups naming this identity, and each costs a row.
    static let maximumRefusals = 10_000

    /// The refusal of `group` from `owner`, if one is remembered.
    public func refusal(group: [UInt8], owner: [UInt8]) throws(VaultError) -> GroupRefusal? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM group_refused WHERE group_id = ? AND owner = ?", arguments: [Data(group), Data(owner)])
                .map(Self.refusal)
        }
    }

    /// The latest refusal of `group`, from whatever owner.
    public func refusal(group: [UInt8]) throws(VaultError) -> GroupRefusal? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM group_refused WHERE group_id = ? ORDER BY refused_at DESC LIMIT 1",
                             arguments: [Data(group)]).map(Self.refusal)
        }
    }

    /// Remembers that `refusal.group` from `refusal.owner` was refused. Returns whether it is
    /// new (the caller says so once).
    @discardableResult
    public func remember(_ refusal: GroupRefusal) throws(VaultError) -> Bool {
        try write { db in
            let known = try Bool.fetchOne(db, sql: "SELECT 1 FROM group_refused WHERE group_id = ? AND owner = ?",
                                          arguments: [Data(refusal.group), Data(refusal.owner)]) ?? false
            try Self.store(db, refusal)
            // Only refusals are trimmed, never a leave: anyone who names this identity in
            // many groups could otherwise push a left group out and have it taken back.
            try db.execute(sql: """
                DELETE FROM group_refused WHERE (group_id, owner) IN
                    (SELECT group_id, owner FROM group_refused WHERE reason != 'left' ORDER BY refused_at DESC LIMIT -1 OFFSET ?)
                """, arguments: [Self.maximumRefusals])
            return !known
        }
    }

    /// The refusals of owners untrusted then whom this identity trusts now (or is): each is
    /// asked about again.
    public func refusalsNowTrusted() throws(VaultError) -> [GroupRefusal] {
        let trusted = Set(try peers().map(\.card.signingKey) + [try identityInfo().card.signingKey])
        return try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM group_refused WHERE reason = 'untrusted'").map(Self.refusal)
        }.filter { trusted.contains($0.owner) }
    }

    /// Leaves `record`'s group: forgets it here, remembers it as left, and keeps each of its
    /// relays as still to be told (``pendingDeclines()``), in one transaction, so that no
    /// later receive takes it again from any relay that still lists it (one that could not
    /// be told yet, or a newer version from its owner).
    public func leave(group record: GroupRecord) throws(VaultError) {
        guard let first = record.relays.first else { throw .malformed(what: "the group record", detail: "it names no relay") }
        try write { db in
            try db.execute(sql: "DELETE FROM relay_group WHERE id = ?", arguments: [Data(record.id)])
            try db.execute(sql: "DELETE FROM group_accepts WHERE group_id = ?", arguments: [Data(record.id)])
            try Self.store(db, GroupRefusal(group: record.id, owner: record.owner.signingKey, version: record.version, reason: .left,
                                            relayURL: first.url, relayCard: first.card))
            for relay in record.relays {
                try db.execute(sql: """
                    INSERT OR REPLACE INTO group_declines (group_id, owner, relay_name, relay_url, relay_card) VALUES (?, ?, ?, ?, ?)
                    """, arguments: [Data(record.id), Data(record.owner.signingKey), relay.name.value, relay.url, Data(relay.card.encoded)])
            }
        }
    }

    /// The relays of groups this identity left that have not been told yet.
    public func pendingDeclines() throws(VaultError) -> [PendingDecline] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM group_declines WHERE told = 0 ORDER BY group_id, relay_url").map(Self.decline)
        }
    }

    /// `relay` was told: it declines `group` for this identity now. Should the group be kept
    /// again by now (a join in another process, after the decline was sent), the relay is
    /// remembered as still to accept it (``pendingAccepts()``), so the join is not undone
    /// there.
    public func declined(group: [UInt8], at relay: KeyCard) throws(VaultError) {
        try write { db in
            try db.execute(sql: "UPDATE group_declines SET told = 1 WHERE group_id = ? AND relay_card = ?", arguments: [Data(group), Data(relay.encoded)])
            try db.execute(sql: """
                INSERT OR IGNORE INTO group_accepts (group_id, relay_card) SELECT ?, ? WHERE EXISTS (SELECT 1 FROM relay_group WHERE id = ?)
                """, arguments: [Data(group), Data(relay.encoded), Data(group)])
        }
    }

    /// Every relay of left group `id` from `owner` as its record named them when it was left,
    /// told or not, by name (empty for a group left before v19 whose relays were all told).
    public func relays(ofLeftGroup id: [UInt8], owner: [UInt8]) throws(VaultError) -> [GroupRecord.Relay] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM group_declines WHERE group_id = ? AND owner = ? ORDER BY relay_name",
                             arguments: [Data(id), Data(owner)]).map(Self.decline).map(\.relay)
        }
    }

    /// The leave of group `id`, if this identity left it (for whatever owner).
    public func leftGroup(_ id: [UInt8]) throws(VaultError) -> GroupRefusal? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM group_refused WHERE group_id = ? AND reason = 'left' ORDER BY refused_at DESC LIMIT 1",
                             arguments: [Data(id)]).map(Self.refusal)
        }
    }

    /// The groups this identity left, most recently left first.
    public func leftGroups() throws(VaultError) -> [GroupRefusal] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM group_refused WHERE reason = 'left' ORDER BY refused_at DESC").map(Self.refusal)
        }
    }

    /// The group this identity left whose id is `name` or begins with it (4 or more hex
    /// digits, as `vault group leave` prints it), looked up before any passphrase is asked.
    public func leftGroup(named name: String) throws(VaultError) -> GroupRefusal {
        let prefix = name.lowercased()
        let matches = try leftGroups().filter { prefix.count >= 4 && $0.group.hex.hasPrefix(prefix) }
        guard let left = matches.first else { throw .unknownGroup(name) }
        guard matches.count == 1 else { throw .ambiguousGroup(name) }
        return left
    }

    /// Forgets a refusal: the group was accepted after all (and its relays need not be told
    /// of a leave any more).
    func forgetRefusal(group: [UInt8], owner: [UInt8]) throws(VaultError) {
        try write { db in try Self.forgetRefusal(db, group: group, owner: owner, keepingDamageAbove: nil) }
    }

    /// Takes `record` from a relay: keeps it as ``accept(group:)`` does and forgets its
    /// refusals (a leave, an untrusted owner, and a relay's damage or the owner's record
    /// found not valid up to its version), in one transaction. Returns whether it was
    /// stored (false: the version kept is as new), or nil when the group is left and this is
    /// no join: a leave committed by another process after the caller looked wins, where a
    /// separate check and write would have kept the group again and forgotten the leave.
    public func take(group record: GroupRecord, joining: Bool) throws(VaultError) -> Bool? {
        try checkTaken(record)
        return try write { db in
            if !joining, try Bool.fetchOne(db, sql: "SELECT 1 FROM group_refused WHERE group_id = ? AND reason = 'left'",
                                           arguments: [Data(record.id)]) ?? false {
                return nil
            }
            let stored = try Self.keep(db, record)
            try Self.forgetRefusal(db, group: record.id, owner: record.owner.signingKey, keepingDamageAbove: record.version)
            return stored
        }
    }

    /// Deletes the refusals of `group` by `owner`, and the leave's relays still to be told.
    /// With `version`, a refusal of a newer version than it for a relay's damage or the
    /// owner's record found not valid still holds: forgotten, that version would be fetched,
    /// and refused in words, at every receive.
    private static func forgetRefusal(_ db: Database, group: [UInt8], owner: [UInt8], keepingDamageAbove version: UInt64?) throws {
        try db.execute(sql: """
            DELETE FROM group_refused WHERE group_id = ? AND owner = ? AND NOT (reason IN ('damaged', 'invalid') AND version > ?)
            """, arguments: [Data(group), Data(owner), version.map { Int64(clamping: $0) } ?? Int64.max])
        try db.execute(sql: "DELETE FROM group_declines WHERE group_id = ? AND owner = ?", arguments: [Data(group), Data(owner)])
    }

    /// Stores `refusal` over any row of its group and owner, but a refusal never over a
    /// leave: whatever a relay lists later, only a join (``take(group:joining:)``) undoes a
    /// leave. Nor does one relay's damage replace what the owner's own record
    /// showed (a refusal for another reason), which holds at every relay.
    private static func store(_ db: Database, _ refusal: GroupRefusal) throws {
        try db.execute(sql: """
            INSERT INTO group_refused (group_id, owner, version, reason, relay_url, relay_card, refused_at) VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (group_id, owner) DO UPDATE SET version = excluded.version, reason = excluded.reason, relay_url = excluded.relay_url,
                relay_card = excluded.relay_card, refused_at = excluded.refused_at
            WHERE (group_refused.reason != 'left' OR excluded.reason = 'left')
              AND (excluded.reason != 'damaged' OR group_refused.reason = 'damaged')
            """, arguments: [Data(refusal.group), Data(refusal.owner), Int64(clamping: refusal.version), refusal.reason.rawValue,
                             refusal.relayURL, Data(refusal.relayCard.encoded), Int64(VaultClock.now().timeIntervalSince1970)])
    }

    private static func decline(_ row: Row) throws -> PendingDecline {
        guard let card = try? KeyCard(encoded: [UInt8](row["relay_card"] as Data)), let name = try? Label(row["relay_name"] as String) else {
            throw VaultError.keystoreCorrupt("a left group's relay row is invalid")
        }
        return PendingDecline(group: [UInt8](row["group_id"] as Data), owner: [UInt8](row["owner"] as Data),
                              relay: GroupRecord.Relay(name: name, url: row["relay_url"], card: card))
    }

    private static func refusal(_ row: Row) throws -> GroupRefusal {
        guard let reason = GroupRefusal.Reason(rawValue: row["reason"]),
              let card = try? KeyCard(encoded: [UInt8](row["relay_card"] as Data)) else {
            throw VaultError.keystoreCorrupt("a refused group's row is invalid")
        }
        return GroupRefusal(group: [UInt8](row["group_id"] as Data), owner: [UInt8](row["owner"] as Data),
                            version: UInt64(max(0, row["version"] as Int64)), reason: reason, relayURL: row["relay_url"], relayCard: card)
    }
}
