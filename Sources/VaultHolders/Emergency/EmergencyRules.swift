import VaultCore
import Foundation
import GRDB

/// A secret's emergency rule as this keystore keeps it: the latest the dealer set here, or
/// the latest a holder received from the secret's dealer, with the holder's answer.
public struct StoredEmergencyRule: Sendable {
    /// Where the rule stands here.
    public enum Role: String, Sendable {
        /// Set here, by the secret's dealer.
        case dealt
        /// Received; its person is asked whether to take the role.
        case offered
        /// Received and taken: the trustee's requests are released after the wait.
        case accepted
        /// Received and declined: the trustee's requests wait for the person, as any other.
        case declined
        /// The dealer turned the rule off.
        case off
    }

    public let rule: EmergencyRule
    public let role: Role
    public let updated: Date
}

/// A dealer's view of one holder's answer to its emergency rule: what `vault secrets show`
/// lists beside the holders' shares.
public struct EmergencyRole: Sendable {
    /// The states, in the order an answer usually passes them.
    public enum State: String, Sendable {
        /// The rule could not be sent yet.
        case notYetReached = "not yet reached"
        /// Stored on the relays (or offered over the LAN); no answer yet.
        case sent
        /// The holder's person is asked.
        case waitingForConsent = "waiting for consent"
        case accepted, declined
        /// The holder took the rule turned off.
        case off
    }

    public let holderKey: [UInt8]
    public let holderLabel: String
    /// The rule answered (its `issued`).
    public let issued: UInt64
    public let state: State
    /// How the rule went: "LAN HOST:PORT", "relays of GROUP".
    public let via: String
    public let updated: Date
}

extension Keystore {
    /// The rule kept for the secret at `secretRow`, if any.
    public func emergencyRule(secretRow: [UInt8]) throws(VaultError) -> StoredEmergencyRule? {
        try read { db in try Self.emergencyRule(secretRow, db) }
    }

    static func emergencyRule(_ secretRow: [UInt8], _ db: Database) throws -> StoredEmergencyRule? {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM emergency_rule WHERE secret_row = ?", arguments: [Data(secretRow)]),
              let role = StoredEmergencyRule.Role(rawValue: row["role"]) else { return nil }
        return StoredEmergencyRule(rule: try EmergencyRule(parsing: [UInt8](row["record"] as Data)), role: role,
                                   updated: Date(timeIntervalSince1970: TimeInterval(row["updated_at"] as Int64)))
    }

    /// The time a new rule of the dealer's for `secretRow` is issued at: now, or just after
    /// the last one if the clock says otherwise, so that holders take it as the newer.
    public func nextRuleIssued(secretRow: [UInt8], now: Date = VaultClock.now()) throws(VaultError) -> UInt64 {
        let clock = UInt64(now.timeIntervalSince1970)
        guard let last = try emergencyRule(secretRow: secretRow) else { return clock }
        return max(clock, last.rule.issued + 1)
    }

    /// Keeps `rule` as the secret's, with `role`, replacing what was kept.
    public func setEmergencyRule(_ rule: EmergencyRule, role: StoredEmergencyRule.Role, now: Date = VaultClock.now()) throws(VaultError) {
        try write { db in try Self.setEmergencyRule(rule, role: role, now: now, db) }
    }

    static func setEmergencyRule(_ rule: EmergencyRule, role: StoredEmergencyRule.Role, now: Date, _ db: Database) throws {
        try db.execute(sql: """
            INSERT INTO emergency_rule (secret_row, record, issued, role, updated_at) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (secret_row) DO UPDATE SET record = excluded.record, issued = excluded.issued, role = excluded.role,
                updated_at = excluded.updated_at
            """, arguments: [Data(rule.secretRow), Data(rule.encoded), Int64(rule.issued), role.rawValue, Int64(now.timeIntervalSince1970)])
    }

    /// A holder's person took (`accept`) or declined the role of `rule`: recorded when
    /// `rule` is still the one offered; false when a newer rule replaced it.
    public func decideRole(_ rule: EmergencyRule, accept: Bool, now: Date = VaultClock.now()) throws(VaultError) -> Bool {
        try write { db in
            try db.execute(sql: "UPDATE emergency_rule SET role = ?, updated_at = ? WHERE secret_row = ? AND issued = ? AND role = 'offered'",
                           arguments: [accept ? "accepted" : "declined", Int64(now.timeIntervalSince1970), Data(rule.secretRow),
                                       Int64(rule.issued)])
            return db.changesCount == 1
        }
    }

    /// Records where holder `holderKey`'s answer to the dealer's rule `issued` stands.
    public func setRole(secretRow: [UInt8], holderKey: [UInt8], label: String, issued: UInt64, state: EmergencyRole.State, via: String,
                        now: Date = VaultClock.now()) throws(VaultError) {
        try write { db in
            try db.execute(sql: """
                INSERT INTO emergency_role (secret_row, holder_key, holder_label, issued, state, via, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (secret_row, holder_key) DO UPDATE SET holder_label = excluded.holder_label, issued = excluded.issued,
                    state = excluded.state, via = excluded.via, updated_at = excluded.updated_at
                """, arguments: [Data(secretRow), Data(holderKey), label, Int64(issued), state.rawValue, via, Int64(now.timeIntervalSince1970)])
        }
    }

    /// A holder's answer through relays: it counts only for the rule it answers being the
    /// one set now, so an answer to an older rule (late, or replayed) changes nothing; and
    /// a late "waiting" never hides an answer given.
    public func answerRole(secretRow: [UInt8], holderKey: [UInt8], issued: UInt64, state: EmergencyRole.State,
                           now: Date = VaultClock.now()) throws(VaultError) -> Bool {
        try write { db in
            let settled = state == .waitingForConsent ? "AND state IN ('sent', 'not yet reached', 'waiting for consent')" : ""
            try db.execute(sql: """
                UPDATE emergency_role SET state = ?, updated_at = ?
                WHERE secret_row = ? AND holder_key = ? AND issued = ?
                    AND issued = (SELECT issued FROM emergency_rule WHERE secret_row = ?) \(settled)
                """, arguments: [state.rawValue, Int64(now.timeIntervalSince1970), Data(secretRow), Data(holderKey), Int64(issued),
                                 Data(secretRow)])
            return db.changesCount > 0
        }
    }

    /// Every holder's answer to the dealer's rule for `secretRow`, by label.
    public func emergencyRoles(secretRow: [UInt8]) throws(VaultError) -> [EmergencyRole] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM emergency_role WHERE secret_row = ? ORDER BY holder_label", arguments: [Data(secretRow)])
                .map { row in
                    EmergencyRole(holderKey: [UInt8](row["holder_key"] as Data), holderLabel: row["holder_label"],
                                  issued: UInt64(row["issued"] as Int64), state: EmergencyRole.State(rawValue: row["state"]) ?? .notYetReached,
                                  via: row["via"], updated: Date(timeIntervalSince1970: TimeInterval(row["updated_at"] as Int64)))
                }
        }
    }
}
