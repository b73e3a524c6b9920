import VaultCore
import Foundation
import GRDB

/// A recovery through relays that has not ended: the requests it sent, one per holder, and
/// what came back. Friends answer in hours, so it outlives the command that started it:
/// `vault recover` again picks up what arrived, and asks nobody twice.
public struct Recovery: Sendable {
    /// One holder asked.
    public struct Ask: Sendable {
        /// Where a request stands, as the requester knows it.
        public enum State: String, Sendable {
            /// Sent; no answer yet.
            case asked
            /// The holder's person was asked (until ``until``).
            case waiting
            /// The piece came, in ``piece``.
            case released
            case denied
            case timedOut = "timed out"
            /// The holder refused it on a check (``detail`` says which).
            case refused
            /// The answer failed a check here (``detail`` says which).
            case failed
        }

        /// Whether an answer may still come: sent and unanswered, or waiting for its person.
        public var isPending: Bool { state == .asked || state == .waiting }

        /// The ``detail`` of a holder's emergency wait, and of a denial by the secret's dealer.
        public static let emergencyDetail = "emergency access"
        public static let dealerDetail = "by the dealer"

        public let nonce: [UInt8]
        public let holderKey: [UInt8]
        public let holderLabel: String
        public let groupID: [UInt8]
        public let state: State
        public let detail: String?
        public let until: Date?
        /// The answering holder's signed bundle prefix (for a requester without a share).
        public let prefix: [UInt8]?
        /// The released piece's file.
        public let piece: String?
        public let updated: Date

        init(row: Row) {
            nonce = [UInt8](row["nonce"] as Data)
            holderKey = [UInt8](row["holder_key"] as Data)
            holderLabel = row["holder_label"]
            groupID = [UInt8](row["group_id"] as Data)
            state = State(rawValue: row["state"]) ?? .failed
            detail = row["detail"]
            until = (row["until_at"] as Int64?).map { Date(timeIntervalSince1970: TimeInterval($0)) }
            prefix = (row["prefix"] as Data?).map { [UInt8]($0) }
            piece = row["piece"]
            updated = Date(timeIntervalSince1970: TimeInterval(row["updated_at"] as Int64))
        }
    }

    /// The keystore's key of the secret: dealer and id (``BundleHeader/rowID``).
    public let secretRow: [UInt8]
    public let secretID: [UInt8]
    public let dealer: KeyCard
    /// Whether this identity holds a share of it (else: recovery onto a new machine).
    public let holdsShare: Bool
    public let replyPublicKey: [UInt8]
    let replySecret: [UInt8]
    public let started: Date
    public let expires: Date
    public let asks: [Ask]

    /// The reply key, opened with `identity`; nil if it does not open (another identity's).
    public func replyKey(_ identity: Identity) -> ReplyKey? {
        ReplyKey.unsealed(replySecret, publicKey: replyPublicKey, identity: identity)
    }
}

extension Keystore {
    /// The recovery of (dealer, `secretID`) under way, if any.
    public func recovery(dealer: KeyCard, secretID: [UInt8]) throws(VaultError) -> Recovery? {
        try read { db in try Self.recovery(row: BundleHeader.rowID(dealer: dealer, secretID: secretID), db) }
    }

    /// Every recovery under way.
    public func recoveries() throws(VaultError) -> [Recovery] {
        try read { db in
            try Data.fetchAll(db, sql: "SELECT secret_row FROM recovery ORDER BY started_at").compactMap { try Self.recovery(row: [UInt8]($0), db) }
        }
    }

    /// Starts recovering (dealer, `secretID`) through relays, with a new reply key sealed
    /// for `identity`; an unexpired recovery under way is returned as it is.
    public func startRecovery(dealer: KeyCard, secretID: [UInt8], holdsShare: Bool, identity: Identity, lifetime: UInt64,
                              now: Date = VaultClock.now()) throws(VaultError) -> Recovery {
        let row = BundleHeader.rowID(dealer: dealer, secretID: secretID)
        let key = ReplyKey()
        // One that expired, or was made as the other kind of requester (a share held since),
        // goes with its pieces: they are sealed to its reply key and index.
        try endExpiredRecoveries(now: now)
        if let old = try recovery(dealer: dealer, secretID: secretID), old.holdsShare != holdsShare { try endRecovery(old) }
        return try write { db in
            let at = Int64(now.timeIntervalSince1970)
            if let running = try Self.recovery(row: row, db) { return running }
            try db.execute(sql: """
                INSERT INTO recovery (secret_row, secret_id, dealer, holds_share, reply_key, reply_secret, started_at, expires_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [Data(row), Data(secretID), Data(dealer.encoded), holdsShare ? 1 : 0, Data(key.publicKey),
                                 Data(key.sealed(for: identity)), at, at + Int64(min(lifetime, RelayPieceRequest.maximumLifetime))])
            return try Self.recovery(row: row, db)!
        }
    }

    /// Records a request sent to a holder.
    public func recordAsk(_ recovery: Recovery, nonce: [UInt8], holder: Peer, groupID: [UInt8], now: Date = VaultClock.now()) throws(VaultError) {
        try write { db in
            try db.execute(sql: """
                INSERT INTO recovery_ask (nonce, secret_row, holder_key, holder_label, group_id, state, updated_at)
                VALUES (?, ?, ?, ?, ?, 'asked', ?)
                """, arguments: [Data(nonce), Data(recovery.secretRow), Data(holder.card.agreementKey), holder.label.value, Data(groupID),
                                 Int64(now.timeIntervalSince1970)])
        }
    }

    /// The ask with this nonce, and its recovery.
    public func ask(nonce: [UInt8]) throws(VaultError) -> (Recovery, Recovery.Ask)? {
        try read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM recovery_ask WHERE nonce = ?", arguments: [Data(nonce)]),
                  let recovery = try Self.recovery(row: [UInt8](row["secret_row"] as Data), db) else { return nil }
            return (recovery, Recovery.Ask(row: row))
        }
    }

    /// Records what a holder answered, while its request is open (asked or waiting): once
    /// released, denied, timed out or refused, a later answer to the same request (a relay
    /// reordering them) changes nothing.
    public func updateAsk(nonce: [UInt8], state: Recovery.Ask.State, detail: String? = nil, until: UInt64? = nil, prefix: [UInt8]? = nil,
                          piece: String? = nil, now: Date = VaultClock.now()) throws(VaultError) {
        try write { db in
            try db.execute(sql: """
                UPDATE recovery_ask SET state = ?, detail = ?, until_at = ?, prefix = ?, piece = ?, updated_at = ?
                WHERE nonce = ? AND state IN ('asked', 'waiting')
                """, arguments: [state.rawValue, detail, until.map { Int64(min($0, UInt64(Int64.max))) }, prefix.map { Data($0) }, piece,
                                 Int64(now.timeIntervalSince1970), Data(nonce)])
        }
    }

    /// Keeps a recovery until at least `until` (Unix seconds): a holder said its emergency
    /// wait ends then, and its piece must find the recovery under way. Bounded by the
    /// longest wait and a request's lifetime from now, whatever a holder says.
    public func extendRecovery(secretRow: [UInt8], until: UInt64, now: Date = VaultClock.now()) throws(VaultError) {
        let bound = UInt64(now.timeIntervalSince1970) + EmergencyRule.longestWait + RelayPieceRequest.maximumLifetime
        try write { db in
            try db.execute(sql: "UPDATE recovery SET expires_at = max(expires_at, ?) WHERE secret_row = ?",
                           arguments: [Int64(min(until, bound)), Data(secretRow)])
        }
    }

    /// Ends a recovery: its rows go, and the piece files it received are returned for removal.
    public func endRecovery(_ recovery: Recovery) throws(VaultError) {
        let files = try write { db in try Self.end(recovery.secretRow, db) }
        for file in files { unlink(file) }
    }

    /// Ends every recovery that expired. Called by each pass that takes answers.
    public func endExpiredRecoveries(now: Date = VaultClock.now()) throws(VaultError) {
        let files = try write { db in
            try Data.fetchAll(db, sql: "SELECT secret_row FROM recovery WHERE expires_at <= ?", arguments: [Int64(now.timeIntervalSince1970)])
                .flatMap { try Self.end([UInt8]($0), db) }
        }
        for file in files { unlink(file) }
    }

    /// Removes a recovery's rows; returns the pieces it received, to remove once that is
    /// committed (nothing refers to them then; a crash in between leaves files sealed to a
    /// reply key that no longer exists).
    private static func end(_ row: [UInt8], _ db: Database) throws -> [String] {
        let files = try String.fetchAll(db, sql: "SELECT piece FROM recovery_ask WHERE secret_row = ? AND piece IS NOT NULL",
                                        arguments: [Data(row)])
        // Its requests are remembered as long as one could still be answered (a request lives
        // at most a week), so that a late answer is said to be late, not taken for a stray.
        let now = Int64(VaultClock.now().timeIntervalSince1970)
        try db.execute(sql: "DELETE FROM recovery_ended WHERE ended_at <= ?", arguments: [now - Int64(RelayPieceRequest.maximumLifetime) - 86_400])
        try db.execute(sql: """
            INSERT OR REPLACE INTO recovery_ended (nonce, holder_label, ended_at) SELECT nonce, holder_label, ? FROM recovery_ask WHERE secret_row = ?
            """, arguments: [now, Data(row)])
        try db.execute(sql: "DELETE FROM recovery WHERE secret_row = ?", arguments: [Data(row)])
        return files
    }

    /// The holder asked by a request of a recovery that has ended, by its nonce: an answer
    /// to it is late.
    public func endedAsk(nonce: [UInt8]) throws(VaultError) -> String? {
        try read { db in try String.fetchOne(db, sql: "SELECT holder_label FROM recovery_ended WHERE nonce = ?", arguments: [Data(nonce)]) }
    }

    /// Forgets an ask whose request could not be sent (it was recorded first, so that an
    /// answer arriving during the send finds it).
    public func forgetAsk(nonce: [UInt8]) throws(VaultError) {
        try write { db in try db.execute(sql: "DELETE FROM recovery_ask WHERE nonce = ?", arguments: [Data(nonce)]) }
    }

    private static func recovery(row: [UInt8], _ db: Database) throws -> Recovery? {
        guard let found = try Row.fetchOne(db, sql: "SELECT * FROM recovery WHERE secret_row = ?", arguments: [Data(row)]) else { return nil }
        let asks = try Row.fetchAll(db, sql: "SELECT * FROM recovery_ask WHERE secret_row = ? ORDER BY holder_label", arguments: [Data(row)])
            .map(Recovery.Ask.init)
        return Recovery(secretRow: row, secretID: [UInt8](found["secret_id"] as Data),
                        dealer: try KeyCard(encoded: [UInt8](found["dealer"] as Data)), holdsShare: (found["holds_share"] as Int) == 1,
                        replyPublicKey: [UInt8](found["reply_key"] as Data), replySecret: [UInt8](found["reply_secret"] as Data),
                        started: Date(timeIntervalSince1970: TimeInterval(found["started_at"] as Int64)),
                        expires: Date(timeIntervalSince1970: TimeInterval(found["expires_at"] as Int64)), asks: asks)
    }
}
