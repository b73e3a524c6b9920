import VaultCore
import Foundation
import GRDB

/// A holder's emergency requests (``HolderRequest/emergency``) and the dealer's decisions
/// it received: what ends a wait before its time, and what the dealer is told.
extension Keystore {
    /// Applies a dealer's `decision` to the emergency requests waiting here from its trustee
    /// with its reply key: a denial cancels them (and those whose wait ended but whose piece
    /// has not gone out), an approval releases them now. It is kept
    /// too, for a request of that recovery that arrives after it (a relay may hold one back).
    /// A denial always wins: one kept is never replaced by an approval, and an approval
    /// kept gives way to a denial. Returns the requests it decided; requests that ended
    /// before are told to the dealer again, so that it learns the decision came too late.
    public func applyEmergencyDecision(_ decision: EmergencyDecision, keepUntil: UInt64, now: Date = VaultClock.now()) throws(VaultError) -> [HolderRequest] {
        try write { db in
            let at = Int64(now.timeIntervalSince1970)
            let kept = try Data.fetchOne(db, sql: "SELECT record FROM emergency_decision WHERE reply_key = ?", arguments: [Data(decision.replyKey)])
                .flatMap { try? EmergencyDecision(parsing: [UInt8]($0)) }
            if kept == nil || (kept!.approves && !decision.approves) {
                try db.execute(sql: """
                    INSERT INTO emergency_decision (reply_key, secret_row, record, received_at, keep_until) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (reply_key) DO UPDATE SET record = excluded.record, received_at = excluded.received_at,
                        keep_until = max(keep_until, excluded.keep_until)
                    """, arguments: [Data(decision.replyKey), Data(decision.secretRow), Data(decision.encoded), at,
                                     Int64(min(keepUntil, UInt64(Int64.max)))])
            }
            let rows = try Row.fetchAll(db, sql: "SELECT * FROM holder_request WHERE kind = 1 AND emergency IS NOT NULL AND secret_row = ?",
                                        arguments: [Data(decision.secretRow)]).map(HolderRequest.init)
            let ours = rows.filter { $0.pieceRequest.map { $0.replyKey == decision.replyKey && $0.requesterCard == decision.trustee } ?? false }
            var decided: [String] = []
            for request in ours {
                // A denial also cancels a wait that ended here but whose piece has not gone
                // out (released and not yet answered): until the piece leaves, the owner's
                // word wins. An approval only ends a wait that still runs.
                let open = request.state == .waiting || (!decision.approves && request.state == .automatic && request.emergency == .released)
                if open {
                    let (state, emergency) = decision.approves ? ("automatic", "approved") : ("denied", "cancelled")
                    try db.execute(sql: "UPDATE holder_request SET state = ?, emergency = ? WHERE id = ? AND state = ?",
                                   arguments: [state, emergency, request.id, request.state.rawValue])
                    decided.append(request.id)
                } else {
                    try db.execute(sql: "UPDATE holder_request SET told = NULL WHERE id = ?", arguments: [request.id])
                }
            }
            return try decided.compactMap { try Row.fetchOne(db, sql: "SELECT * FROM holder_request WHERE id = ?", arguments: [$0]) }
                .map(HolderRequest.init)
        }
    }

    /// The dealer's decision kept for the trustee's recovery with `replyKey`, if any.
    public func emergencyDecision(replyKey: [UInt8]) throws(VaultError) -> EmergencyDecision? {
        try read { db in
            try Data.fetchOne(db, sql: "SELECT record FROM emergency_decision WHERE reply_key = ?", arguments: [Data(replyKey)])
                .flatMap { try? EmergencyDecision(parsing: [UInt8]($0)) }
        }
    }

    /// A new rule for `secretRow` came: waiting emergency requests from anyone but
    /// `trustee` (everyone, for nil: the rule is off or not taken yet) are cancelled, as the
    /// dealer's denial would; those from `trustee` wait `wait` seconds from when they came.
    func followRule(secretRow: [UInt8], trustee: KeyCard?, wait: UInt64) throws(VaultError) {
        try write { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT * FROM holder_request WHERE kind = 1 AND emergency = 'waiting' AND state = 'waiting' AND secret_row = ?
                """, arguments: [Data(secretRow)]).map(HolderRequest.init)
            for request in rows {
                if let trustee, request.pieceRequest?.requesterCard == trustee {
                    let releaseAt = Int64(request.received.timeIntervalSince1970) + Int64(wait)
                    try db.execute(sql: "UPDATE holder_request SET release_at = ?, expires_at = max(expires_at, ?), told = NULL WHERE id = ?",
                                   arguments: [releaseAt, releaseAt + 86_400, request.id])
                } else {
                    try db.execute(sql: "UPDATE holder_request SET state = 'denied', emergency = 'cancelled' WHERE id = ?", arguments: [request.id])
                }
            }
        }
    }

    /// Emergency requests whose dealer has not been told where they stand now.
    public func emergencyNoticesDue() throws(VaultError) -> [HolderRequest] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM holder_request WHERE kind = 1 AND emergency IS NOT NULL ORDER BY received_at, id")
                .map(HolderRequest.init).filter { request in request.notice.map { Int($0.rawValue) != request.told } ?? false }
        }
    }

    /// Records that the dealer was told `state` of `request`.
    public func markTold(_ request: HolderRequest, _ state: HolderRecord.NoticeState) throws(VaultError) {
        try write { db in
            try db.execute(sql: "UPDATE holder_request SET told = ? WHERE id = ?", arguments: [Int(state.rawValue), request.id])
        }
    }

    /// When the next emergency wait here ends, if one runs.
    public func nextEmergencyRelease() throws(VaultError) -> Date? {
        try read { db in
            try Int64.fetchOne(db, sql: "SELECT min(release_at) FROM holder_request WHERE state = 'waiting' AND emergency = 'waiting'")
                .map { Date(timeIntervalSince1970: TimeInterval($0)) }
        }
    }

    /// The one waiting emergency request whose id starts with `prefix`, if any.
    public func emergencyWait(matching prefix: String, now: Date = VaultClock.now()) throws(VaultError) -> HolderRequest? {
        let prefix = prefix.lowercased()
        guard prefix.count >= 4, prefix.allSatisfy(\.isHexDigit) else { return nil }
        let matches = try holderRequests([.waiting], now: now).filter { $0.id.hasPrefix(prefix) }
        guard matches.count == 1, let match = matches.first, match.emergency != nil else { return nil }
        return match
    }

    /// Forgets dealer decisions past their time.
    public func forgetOldEmergencyDecisions(now: Date = VaultClock.now()) throws(VaultError) {
        try write { db in
            try db.execute(sql: "DELETE FROM emergency_decision WHERE keep_until <= ?", arguments: [Int64(now.timeIntervalSince1970)])
        }
    }
}
