import VaultCore
import Foundation
import GRDB

/// A request that reached this holder through a group's relays and waits for, or had, its
/// person's decision: a piece request, a dealer's share offer, or a dealer's emergency rule
/// (the role it offers; this one may also come over the LAN). It lives in the keystore,
/// so that it survives `vault serve` restarting (friends answer in hours), and is listed,
/// approved and denied like a request over the LAN (``ReleaseApprovals``).
public struct HolderRequest: Sendable {
    /// What is asked.
    public enum Kind: Int, Sendable {
        /// A piece of a share held here (``RelayPieceRequest``).
        case piece = 1
        /// Keeping a share a dealer offers.
        case share = 2
        /// Taking the emergency role a dealer's rule offers (``EmergencyRule``).
        case role = 3
    }

    /// Where an emergency request stands (a piece request from the trustee of an emergency
    /// rule this holder took): it waits until ``releaseAt`` by this holder's clock, then
    /// is released, unless the dealer denies it (cancelled) or this holder's person does.
    public enum Emergency: String, Sendable {
        case waiting, cancelled, denied
        /// The dealer approved: released before the wait ended.
        case approved
        /// The wait ended.
        case released
        /// A newer request of the same trustee for the same share took its place (its
        /// dealer is told, as of any other end).
        case replaced
    }

    /// Where it stands. Each transition is one keystore write: waiting → approved |
    /// automatic | denied | expired → answered (the answer went out).
    public enum State: String, Sendable {
        case waiting, approved, automatic, denied, expired, answered
    }

    /// 8 hex digits, to approve or deny it by.
    public let id: String
    /// The request's nonce (a share offer's: its message id): a second copy is a replay.
    public let nonce: [UInt8]
    public let kind: Kind
    /// The group it came through, and through which the answer goes.
    public let groupID: [UInt8]
    /// The requester (or dealer), a trusted peer, by its X25519 key and its label then.
    public let peerKey: [UInt8]
    public let peerLabel: String
    /// The share asked for (piece requests).
    public let secretRow: [UInt8]?
    /// A piece request's bytes; a share offer's bundle file path.
    public let record: [UInt8]
    public let state: State
    public let received: Date
    public let expires: Date
    /// An emergency request's release time, by this holder's clock (received + the wait).
    public let releaseAt: Date?
    /// Where an emergency request stands; nil for any other request.
    public let emergency: Emergency?
    /// What the dealer was last told of an emergency request (``HolderRecord/NoticeState``).
    let told: Int?

    /// A piece request's request.
    public var pieceRequest: RelayPieceRequest? { kind == .piece ? try? RelayPieceRequest(parsing: record) : nil }
    /// A share offer's bundle file.
    public var bundlePath: String? { kind == .share ? String(decoding: record, as: UTF8.self) : nil }
    /// A role offer's rule.
    public var rule: EmergencyRule? { kind == .role ? try? EmergencyRule(parsing: record) : nil }

    /// What the dealer should know of an emergency request now; nil while it is decided and
    /// not yet answered, and for any other request.
    public var notice: HolderRecord.NoticeState? {
        guard let emergency else { return nil }
        switch (state, emergency) {
        case (.waiting, _): return .waiting
        case (.answered, .released), (.answered, .approved): return .released
        case (.denied, .cancelled), (.answered, .cancelled): return .cancelled
        case (.denied, .denied), (.answered, .denied): return .denied
        case (.expired, .replaced): return .replaced
        default: return nil
        }
    }

    init(row: Row) {
        id = row["id"]
        nonce = [UInt8](row["nonce"] as Data)
        kind = Kind(rawValue: row["kind"]) ?? .piece
        groupID = [UInt8](row["group_id"] as Data)
        peerKey = [UInt8](row["peer_key"] as Data)
        peerLabel = row["peer_label"]
        secretRow = (row["secret_row"] as Data?).map { [UInt8]($0) }
        record = [UInt8](row["record"] as Data)
        state = State(rawValue: row["state"]) ?? .waiting
        received = Date(timeIntervalSince1970: TimeInterval(row["received_at"] as Int64))
        expires = Date(timeIntervalSince1970: TimeInterval(row["expires_at"] as Int64))
        releaseAt = (row["release_at"] as Int64?).map { Date(timeIntervalSince1970: TimeInterval($0)) }
        emergency = (row["emergency"] as String?).flatMap(Emergency.init(rawValue:))
        told = row["told"]
    }
}

/// What became of a request offered to the keystore's queue.
public enum HolderIntake: Sendable {
    case added(HolderRequest)
    /// Its nonce is known: a replay.
    case replayed
    /// The queue is full: for this peer, or in all.
    case busy
}

extension Keystore {
    /// Records a request that came through relays, waiting (or, with `state`, decided
    /// already: an automatic release), in one transaction with its checks: its nonce is
    /// new, the peer has fewer than ``ConsentLimits/holderRequestsPerPeer`` requests and
    /// offers waiting and fewer than ``ConsentLimits/holderRecordsPerPeer`` kept (whatever
    /// their state, until they are forgotten), and fewer than
    /// ``ConsentLimits/pendingHolderRequests`` wait in all. A waiting request of the same
    /// peer for the same share is replaced: the newest is the one its requester waits for;
    /// so is a role offered for the same secret (the newer rule replaces it).
    /// An emergency request has its `releaseAt` (Unix seconds, by this clock) and `emergency`.
    public func addHolderRequest(nonce: [UInt8], kind: HolderRequest.Kind, groupID: [UInt8], peer: Peer, secretRow: [UInt8]?,
                                 record: [UInt8], state: HolderRequest.State = .waiting, expires: UInt64,
                                 releaseAt: UInt64? = nil, emergency: HolderRequest.Emergency? = nil,
                                 now: Date = VaultClock.now()) throws(VaultError) -> HolderIntake {
        try write { db in
            guard try Int.fetchOne(db, sql: "SELECT count(*) FROM holder_request WHERE nonce = ?", arguments: [Data(nonce)]) == 0 else {
                return .replayed
            }
            if let secretRow, kind == .piece {
                // An emergency wait replaced so is told to the dealer as replaced, never left
                // to look as if it still ran (a dealer that denied the old one only would
                // think the trustee stopped).
                try db.execute(sql: """
                    UPDATE holder_request SET state = 'expired',
                        emergency = CASE WHEN emergency IS NULL THEN NULL ELSE 'replaced' END,
                        told = CASE WHEN emergency IS NULL THEN told ELSE NULL END
                    WHERE peer_key = ? AND secret_row = ? AND kind = 1 AND state = 'waiting'
                    """, arguments: [Data(peer.card.agreementKey), Data(secretRow)])
            }
            if let secretRow, kind == .role {
                // Superseded: nothing to answer (the dealer heeds only answers to its latest rule).
                try db.execute(sql: "UPDATE holder_request SET state = 'answered' WHERE secret_row = ? AND kind = 3 AND state = 'waiting'",
                               arguments: [Data(secretRow)])
            }
            let peerKey = Data(peer.card.agreementKey)
            let kept = try Int.fetchOne(db, sql: "SELECT count(*) FROM holder_request WHERE peer_key = ?", arguments: [peerKey]) ?? 0
            let peerWaiting = try Int.fetchOne(db, sql: "SELECT count(*) FROM holder_request WHERE peer_key = ? AND state = 'waiting'",
                                               arguments: [peerKey]) ?? 0
            let waiting = try Int.fetchOne(db, sql: "SELECT count(*) FROM holder_request WHERE state = 'waiting'") ?? 0
            guard kept < ConsentLimits.holderRecordsPerPeer, peerWaiting < ConsentLimits.holderRequestsPerPeer,
                  waiting < ConsentLimits.pendingHolderRequests else { return .busy }
            var id: String
            repeat { id = SecureRandom().bytes(4).hex } while try Int.fetchOne(db, sql: "SELECT count(*) FROM holder_request WHERE id = ?",
                                                                                  arguments: [id]) != 0
            try db.execute(sql: """
                INSERT INTO holder_request (id, nonce, kind, group_id, peer_key, peer_label, secret_row, record, state, received_at, expires_at,
                                            release_at, emergency)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [id, Data(nonce), kind.rawValue, Data(groupID), Data(peer.card.agreementKey), peer.label.value,
                                 secretRow.map { Data($0) }, Data(record), state.rawValue, Int64(now.timeIntervalSince1970), Int64(expires),
                                 releaseAt.map { Int64($0) }, emergency?.rawValue])
            return .added(HolderRequest(row: try Row.fetchOne(db, sql: "SELECT * FROM holder_request WHERE id = ?", arguments: [id])!))
        }
    }

    /// Whether a request or offer with this nonce (an offer's: its message id) is kept.
    public func hasHolderRequest(nonce: [UInt8]) throws(VaultError) -> Bool {
        try read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM holder_request WHERE nonce = ?", arguments: [Data(nonce)]) ?? 0 > 0 }
    }

    /// Requests in these states, oldest first. A read: nothing changes (a waiting request
    /// whose time ran out is left out of `waiting`, and stays so until
    /// ``lapseExpiredRequests(now:)``; an emergency wait that ended still waits until
    /// ``releaseEndedWaits(endedBy:heardFrom:)``). Reads that changed state once let any
    /// listing release a wait before the dealer's denial, stored on the relays, was read.
    public func holderRequests(_ states: [HolderRequest.State], now: Date = VaultClock.now()) throws(VaultError) -> [HolderRequest] {
        try read { db in
            let marks = states.map { _ in "?" }.joined(separator: ", ")
            return try Row.fetchAll(db, sql: """
                SELECT * FROM holder_request WHERE state IN (\(marks)) AND (state != 'waiting' OR expires_at > ?) ORDER BY received_at, id
                """, arguments: StatementArguments(states.map(\.rawValue) + [Int64(now.timeIntervalSince1970)])).map(HolderRequest.init)
        }
    }

    /// The event "time ran out": waiting requests past their expiry become `expired`, to be
    /// answered so. Emergency waits expire a day after they release, never before.
    public func lapseExpiredRequests(now: Date = VaultClock.now()) throws(VaultError) {
        try write { db in
            try db.execute(sql: "UPDATE holder_request SET state = 'expired' WHERE state = 'waiting' AND expires_at <= ?",
                           arguments: [Int64(now.timeIntervalSince1970)])
        }
    }

    /// The event "the wait ended": emergency waits that ended by `cutoff` (by this holder's
    /// clock) become `automatic`, to be released, but only those whose dealer
    /// `heardFrom` says this holder has heard through: every message the dealer stored for
    /// it before `cutoff` was read. The caller passes the time it began reading the relays,
    /// so that a denial stored before the wait ended is always taken first. Returns how many
    /// it released.
    @discardableResult
    public func releaseEndedWaits(endedBy cutoff: Date, heardFrom: (KeyCard) -> Bool) throws(VaultError) -> Int {
        try write { db in
            let due = try Row.fetchAll(db, sql: """
                SELECT * FROM holder_request WHERE state = 'waiting' AND emergency = 'waiting' AND release_at <= ?
                """, arguments: [Int64(cutoff.timeIntervalSince1970)]).map(HolderRequest.init)
            var released = 0
            for request in due where request.pieceRequest.map({ heardFrom($0.dealer) }) ?? false {
                try db.execute(sql: "UPDATE holder_request SET state = 'automatic', emergency = 'released' WHERE id = ? AND state = 'waiting'",
                               arguments: [request.id])
                released += db.changesCount
            }
            return released
        }
    }

    /// Approves or denies the waiting request whose id starts with `prefix` (at least 4 hex
    /// digits): nil when no single one matches, or when `unless` says the prefix also
    /// matches elsewhere (the LAN's queue), checked under the same write. An emergency
    /// request is never approved here: only its dealer ends the wait early (a holder that
    /// could would release behind the owner's back); it can be denied.
    public func decideHolderRequest(_ prefix: String, approve: Bool, unless matchesElsewhere: () -> Bool = { false },
                                    now: Date = VaultClock.now()) throws(VaultError) -> HolderRequest? {
        let prefix = prefix.lowercased()
        guard prefix.count >= 4, prefix.allSatisfy(\.isHexDigit) else { return nil }
        return try write { db in
            let matches = try Row.fetchAll(db, sql: "SELECT * FROM holder_request WHERE state = 'waiting' AND expires_at > ? AND id LIKE ?",
                                           arguments: [Int64(now.timeIntervalSince1970), prefix + "%"]).map(HolderRequest.init)
            guard matches.count == 1, let match = matches.first, !matchesElsewhere(), !(approve && match.emergency != nil) else { return nil }
            try db.execute(sql: "UPDATE holder_request SET state = ?, emergency = CASE WHEN emergency IS NULL THEN NULL ELSE 'denied' END WHERE id = ?",
                           arguments: [approve ? "approved" : "denied", match.id])
            return match
        }
    }

    /// The event "withdrawn": the requester says its recovery is over. A piece request of
    /// `peerKey`'s with this nonce that waits, or was decided and not answered, is answered
    /// with nothing (its question goes); returns it. An emergency request is left to run
    /// (its dealer watches it, and what it releases opens a recovery that ended: nothing).
    public func withdrawHolderRequest(nonce: [UInt8], from peerKey: [UInt8]) throws(VaultError) -> HolderRequest? {
        try write { db in
            guard let row = try Row.fetchOne(db, sql: """
                SELECT * FROM holder_request WHERE nonce = ? AND peer_key = ? AND kind = 1 AND emergency IS NULL
                    AND state IN ('waiting', 'approved', 'automatic')
                """, arguments: [Data(nonce), Data(peerKey)]) else { return nil }
            let request = HolderRequest(row: row)
            try db.execute(sql: "UPDATE holder_request SET state = 'answered' WHERE id = ?", arguments: [request.id])
            return request
        }
    }

    /// Takes a decided request to answer it: false when another process took it first (a
    /// `vault receive` beside a serve), so that a piece goes out once.
    public func claimAnswer(_ request: HolderRequest) throws(VaultError) -> Bool {
        try write { db in
            try db.execute(sql: "UPDATE holder_request SET state = 'answered' WHERE id = ? AND state = ?",
                           arguments: [request.id, request.state.rawValue])
            return db.changesCount == 1
        }
    }

    /// Gives back a request claimed to answer, whose answer could not be sent: the next
    /// run answers it.
    public func unclaimAnswer(_ request: HolderRequest) throws(VaultError) {
        try write { db in
            try db.execute(sql: "UPDATE holder_request SET state = ? WHERE id = ? AND state = 'answered'",
                           arguments: [request.state.rawValue, request.id])
        }
    }

    /// Forgets requests a day past their expiry (the day leaves time to send a timed-out
    /// answer): a copy arriving later is refused as expired, without its nonce. Returns the
    /// bundle files of share offers never kept, to remove.
    public func forgetExpiredHolderRequests(now: Date = VaultClock.now()) throws(VaultError) -> [String] {
        try write { db in
            let cutoff = Int64(now.timeIntervalSince1970) - 86_400
            let gone = try Row.fetchAll(db, sql: "SELECT * FROM holder_request WHERE expires_at <= ?", arguments: [cutoff]).map(HolderRequest.init)
            try db.execute(sql: "DELETE FROM holder_request WHERE expires_at <= ?", arguments: [cutoff])
            return gone.compactMap(\.bundlePath)
        }
    }
}
