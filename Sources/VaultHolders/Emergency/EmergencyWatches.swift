import VaultCore
import Foundation
import GRDB

/// A dealer's view of one emergency request: its trustee's recovery (by its reply key), as
/// the secret's holders told of it, and the dealer's decision. `vault requests` lists one
/// that waits, `vault deny ID` and `vault approve ID` decide it, and every holder of the
/// secret is sent the decision, told of the request or not.
public struct EmergencyWatch: Sendable {
    /// Where the request stands at one holder, as it told the dealer.
    public enum HolderState: String, Sendable {
        /// The holder has not told of it (it may not have the request, or its notice was lost).
        case untold
        case waiting
        /// Cancelled by the dealer's denial.
        case cancelled
        /// Refused by the holder's person.
        case denied
        case released
        /// A newer request of the trustee's replaced it at this holder.
        case replaced
    }

    /// One holder, as it told the dealer.
    public struct Holder: Sendable {
        public let key: [UInt8]
        public let label: String
        public let state: HolderState
        /// When the holder received the request, and when it releases, by its clock.
        public let received: Date?
        public let releaseAt: Date?
        /// Whether the dealer's decision is stored on the relays for it.
        public let decisionSent: Bool
    }

    public enum Decision: String, Sendable {
        case denied, approved
    }

    /// 8 hex digits, the same on every machine of the dealer (a name of the reply key
    /// only the dealer can compute, ``id(replyKey:dealer:)``).
    public let id: String
    public let replyKey: [UInt8]
    public let secretRow: [UInt8]
    public let trustee: KeyCard
    public let trusteeLabel: String
    public let firstSeen: Date
    public let decision: Decision?
    /// The signed decision, once made (``EmergencyDecision``).
    let record: [UInt8]?
    public let decidedAt: Date?
    public let holders: [Holder]

    /// When the trustee asked, as near as the dealer knows: the earliest a holder received
    /// the request (by its clock), else when the dealer first heard of it. The dealer may
    /// hear minutes later (a holder without a serve tells at its next receive).
    public var asked: Date { holders.compactMap(\.received).min() ?? firstSeen }

    /// The earliest a waiting holder releases.
    public var releaseAt: Date? { holders.filter { $0.state == .waiting }.compactMap(\.releaseAt).min() }

    /// Whether the dealer can still decide: undecided, and a holder still waits.
    public var isOpen: Bool { decision == nil && holders.contains { $0.state == .waiting } }

    /// The id of the watch of the recovery with `replyKey`, as `dealer` names it. The
    /// trustee chooses the reply key: a plain hash of it let the trustee make two requests
    /// with one id, so that `vault deny ID` matched neither. Keyed by the dealer's secret,
    /// it cannot be searched for.
    static func id(replyKey: [UInt8], dealer: Identity) -> String {
        dealer.privateName("vault/v1/emergency-watch-id", of: replyKey, length: 4).hex
    }
}

extension Keystore {
    /// Records what `holder` told of the emergency request in `notice` (the trustee's
    /// request for the dealer's secret at `secretRow`); returns the watch and whether the
    /// holder's state changed (a notice replayed changes nothing).
    public func noteEmergency(_ notice: HolderRecord.Notice, holder: KeyCard, holderLabel: String, trusteeLabel: String, secretRow: [UInt8],
                              dealer: Identity, now: Date = VaultClock.now()) throws(VaultError) -> (watch: EmergencyWatch, changed: Bool) {
        let request = notice.request
        let state: EmergencyWatch.HolderState = switch notice.state {
        case .waiting: .waiting
        case .cancelled: .cancelled
        case .denied: .denied
        case .released: .released
        case .replaced: .replaced
        }
        return try write { db in
            let at = Int64(now.timeIntervalSince1970)
            // A watch lives as long as a holder may still release, and a week more to show it.
            let until = Int64(min(notice.releaseAt, UInt64(Int64.max) - 8 * 86_400)) + 7 * 86_400
            try db.execute(sql: """
                INSERT INTO emergency_watch (reply_key, id, secret_row, trustee, trustee_label, first_seen, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (reply_key) DO UPDATE SET expires_at = max(expires_at, excluded.expires_at)
                """, arguments: [Data(request.replyKey), EmergencyWatch.id(replyKey: request.replyKey, dealer: dealer), Data(secretRow),
                                 Data(request.requesterCard.encoded), trusteeLabel, at, until])
            // A holder's later word replaces its earlier one, but nothing ends a request that
            // ended (a "waiting" replayed after a release).
            let old = try String.fetchOne(db, sql: "SELECT state FROM emergency_watch_holder WHERE reply_key = ? AND holder_key = ?",
                                          arguments: [Data(request.replyKey), Data(holder.agreementKey)])
            let changed = old != state.rawValue && (old == nil || old == "untold" || old == "waiting")
            if changed {
                try db.execute(sql: """
                    INSERT INTO emergency_watch_holder (reply_key, holder_key, holder_label, state, received_at, release_at, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (reply_key, holder_key) DO UPDATE SET holder_label = excluded.holder_label, state = excluded.state,
                        received_at = excluded.received_at, release_at = excluded.release_at, updated_at = excluded.updated_at
                    """, arguments: [Data(request.replyKey), Data(holder.agreementKey), holderLabel, state.rawValue, Int64(notice.received),
                                     Int64(notice.releaseAt), at])
            }
            return (try Self.watch(replyKey: request.replyKey, db)!, changed)
        }
    }

    /// The emergency requests told of, for one secret or all, newest first.
    public func emergencyWatches(secretRow: [UInt8]? = nil) throws(VaultError) -> [EmergencyWatch] {
        try read { db in
            let keys = try Data.fetchAll(db, sql: "SELECT reply_key FROM emergency_watch WHERE ? IS NULL OR secret_row = ? ORDER BY first_seen DESC",
                                         arguments: [secretRow.map { Data($0) }, secretRow.map { Data($0) }])
            return try keys.compactMap { try Self.watch(replyKey: [UInt8]($0), db) }
        }
    }

    /// Denies or approves the open emergency request whose id starts with `prefix` (at least
    /// 4 hex digits): nil when no single one matches, or when `unless` says the prefix also
    /// matches elsewhere. The decision is signed and sent by ``EmergencyWatch`` senders
    /// (`vault serve`'s watch, or the command itself), which hold the identity.
    public func decideEmergencyWatch(_ prefix: String, approve: Bool, unless matchesElsewhere: () -> Bool = { false },
                                     now: Date = VaultClock.now()) throws(VaultError) -> EmergencyWatch? {
        let prefix = prefix.lowercased()
        guard prefix.count >= 4, prefix.allSatisfy(\.isHexDigit) else { return nil }
        return try write { db in
            let keys = try Data.fetchAll(db, sql: "SELECT reply_key FROM emergency_watch WHERE decision IS NULL AND id LIKE ?",
                                         arguments: [prefix + "%"])
            let open = try keys.compactMap { try Self.watch(replyKey: [UInt8]($0), db) }.filter(\.isOpen)
            guard open.count == 1, let match = open.first, !matchesElsewhere() else { return nil }
            try db.execute(sql: "UPDATE emergency_watch SET decision = ?, decided_at = ? WHERE reply_key = ? AND decision IS NULL",
                           arguments: [approve ? "approved" : "denied", Int64(now.timeIntervalSince1970), Data(match.replyKey)])
            return try Self.watch(replyKey: match.replyKey, db)
        }
    }

    /// Keeps the signed decision of a watch, made once and sent as it is to every holder.
    func setDecisionRecord(replyKey: [UInt8], record: [UInt8]) throws(VaultError) {
        try write { db in
            try db.execute(sql: "UPDATE emergency_watch SET record = ? WHERE reply_key = ? AND record IS NULL",
                           arguments: [Data(record), Data(replyKey)])
        }
    }

    /// Adds `holders` (key, label) that have not told of a watch's request: its decision goes
    /// to every holder of the secret.
    func addUntoldHolders(replyKey: [UInt8], _ holders: [(key: [UInt8], label: String)], now: Date = VaultClock.now()) throws(VaultError) {
        try write { db in
            for holder in holders {
                try db.execute(sql: """
                    INSERT OR IGNORE INTO emergency_watch_holder (reply_key, holder_key, holder_label, state, updated_at) VALUES (?, ?, ?, 'untold', ?)
                    """, arguments: [Data(replyKey), Data(holder.key), holder.label, Int64(now.timeIntervalSince1970)])
            }
        }
    }

    /// Records that a watch's decision is stored on the relays for `holderKey`.
    public func markDecisionSent(replyKey: [UInt8], holderKey: [UInt8]) throws(VaultError) {
        try write { db in
            try db.execute(sql: "UPDATE emergency_watch_holder SET decision_sent = 1 WHERE reply_key = ? AND holder_key = ?",
                           arguments: [Data(replyKey), Data(holderKey)])
        }
    }

    /// Forgets watches past their time.
    public func forgetOldWatches(now: Date = VaultClock.now()) throws(VaultError) {
        try write { db in
            try db.execute(sql: "DELETE FROM emergency_watch WHERE expires_at <= ?", arguments: [Int64(now.timeIntervalSince1970)])
        }
    }

    private static func watch(replyKey: [UInt8], _ db: Database) throws -> EmergencyWatch? {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM emergency_watch WHERE reply_key = ?", arguments: [Data(replyKey)]) else {
            return nil
        }
        let holders = try Row.fetchAll(db, sql: "SELECT * FROM emergency_watch_holder WHERE reply_key = ? ORDER BY holder_label",
                                       arguments: [Data(replyKey)]).map { holder in
            EmergencyWatch.Holder(key: [UInt8](holder["holder_key"] as Data), label: holder["holder_label"],
                                  state: EmergencyWatch.HolderState(rawValue: holder["state"]) ?? .untold,
                                  received: (holder["received_at"] as Int64?).map { Date(timeIntervalSince1970: TimeInterval($0)) },
                                  releaseAt: (holder["release_at"] as Int64?).map { Date(timeIntervalSince1970: TimeInterval($0)) },
                                  decisionSent: (holder["decision_sent"] as Int) == 1)
        }
        return EmergencyWatch(id: row["id"], replyKey: replyKey, secretRow: [UInt8](row["secret_row"] as Data),
                              trustee: try KeyCard(encoded: [UInt8](row["trustee"] as Data)), trusteeLabel: row["trustee_label"],
                              firstSeen: Date(timeIntervalSince1970: TimeInterval(row["first_seen"] as Int64)),
                              decision: (row["decision"] as String?).flatMap(EmergencyWatch.Decision.init(rawValue:)),
                              record: (row["record"] as Data?).map { [UInt8]($0) },
                              decidedAt: (row["decided_at"] as Int64?).map { Date(timeIntervalSince1970: TimeInterval($0)) }, holders: holders)
    }
}
