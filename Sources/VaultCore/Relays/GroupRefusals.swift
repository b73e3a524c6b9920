import Foundation
import GRDB

/// A group record this identity refused (Docs/RELAY.md, "Joining a group"): remembered so
/// that a relay that lists it again costs no request and prints no warning.
public struct GroupRefusal: Sendable, Equatable {
    /// Why it was refused.
    public enum Reason: String, Sendable {
        /// Its owner was not this identity or a trusted peer. Asked about again once it is.
        case untrusted
        /// Its record was not valid (it did not parse or verify, was for another id, or did
        /// not name this identity). Fetched again only at a higher version.
        case invalid
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
            try db.execute(sql: """
                INSERT OR REPLACE INTO group_refused (group_id, owner, version, reason, relay_url, relay_card, refused_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """, arguments: [Data(refusal.group), Data(refusal.owner), Int64(clamping: refusal.version), refusal.reason.rawValue,
                                 refusal.relayURL, Data(refusal.relayCard.encoded), Int64(Date().timeIntervalSince1970)])
            try db.execute(sql: """
                DELETE FROM group_refused WHERE (group_id, owner) IN
                    (SELECT group_id, owner FROM group_refused ORDER BY refused_at DESC LIMIT -1 OFFSET ?)
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

    /// Forgets a refusal: the group was accepted after all.
    public func forgetRefusal(group: [UInt8], owner: [UInt8]) throws(VaultError) {
        try write { db in
            try db.execute(sql: "DELETE FROM group_refused WHERE group_id = ? AND owner = ?", arguments: [Data(group), Data(owner)])
        }
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
