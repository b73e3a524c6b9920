import Foundation
import GRDB

/// What a holder decided about releasing its piece to another holder.
public enum ReleaseDecision: String, Sendable, CaseIterable {
    /// The person approved this request (`vault approve`, or serve's terminal).
    case approved
    /// Released without asking: the person opted in for this peer (``Keystore/setAutoRelease(_:secretID:peer:)``).
    case automatic
    /// Released offline by the person (`vault secrets release`).
    case manual
    /// The person said no.
    case denied
    /// Nobody answered in time.
    case timedOut = "timed out"
    /// An emergency request came from the trustee of a rule this holder took: the wait
    /// started (the detail says when it ends).
    case emergencyWait = "emergency wait started"
    /// Released to the trustee when the emergency wait ended.
    case emergency = "released after the emergency wait"
    /// The dealer approved the emergency request: released before the wait ended.
    case approvedByDealer = "approved by the dealer"
    /// The dealer denied the emergency request.
    case deniedByDealer = "denied by the dealer"
    /// This holder's person took, or declined, the role of a dealer's emergency rule
    /// naming the peer.
    case roleAccepted = "emergency role accepted"
    case roleDeclined = "emergency role declined"
    /// The dealer turned its emergency rule naming the peer off.
    case ruleOff = "emergency rule turned off"
}

/// One entry of a secret's release record.
public struct ReleaseRecord: Sendable {
    /// The peer that asked, by the label it had then.
    public let peerLabel: String
    /// The holder index the peer proved.
    public let requester: Int
    /// When it was decided.
    public let at: Date
    /// What was decided.
    public let decision: ReleaseDecision
    /// More about it (an emergency wait's end).
    public let detail: String?
}

/// Release needs the holder's consent by default: a thief who runs one holder's machine
/// must not collect the others' pieces unattended. These are the explicit opt-ins to
/// release without asking (for a person's own machines), and the record of every decision.
extension Keystore {
    /// Whether pieces of `secretID` go to `peer` without asking: an opt-in for that secret,
    /// or for every secret of that peer.
    public func releasesAutomatically(secretID: [UInt8], to peer: KeyCard) throws(VaultError) -> Bool {
        try read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM auto_release WHERE peer_key = ? AND (secret_id = ? OR secret_id = x'')",
                             arguments: [Data(peer.agreementKey), Data(secretID)]) ?? 0 > 0
        }
    }

    /// Turns automatic release to `peer` on or off, for `secretID` or (nil) for every
    /// secret, now and later. Returns false when nothing changed.
    @discardableResult
    public func setAutoRelease(_ on: Bool, secretID: [UInt8]?, peer: KeyCard) throws(VaultError) -> Bool {
        try write { db in
            let arguments: StatementArguments = [Data(secretID ?? []), Data(peer.agreementKey)]
            if on {
                try db.execute(sql: "INSERT OR IGNORE INTO auto_release (secret_id, peer_key) VALUES (?, ?)", arguments: arguments)
            } else {
                try db.execute(sql: "DELETE FROM auto_release WHERE secret_id = ? AND peer_key = ?", arguments: arguments)
            }
            return db.changesCount > 0
        }
    }

    /// The peers that receive pieces of `secretID` without asking; `everySecret` marks a
    /// peer-wide opt-in.
    public func autoReleasePeers(secretID: [UInt8]) throws(VaultError) -> [(peer: Peer, everySecret: Bool)] {
        let rows = try read { db in
            try Row.fetchAll(db, sql: "SELECT secret_id, peer_key FROM auto_release WHERE secret_id = ? OR secret_id = x''",
                             arguments: [Data(secretID)])
                .map { (everySecret: ($0["secret_id"] as Data).isEmpty, key: [UInt8]($0["peer_key"] as Data)) }
        }
        let peers = try peers()
        return rows.compactMap { row in peers.first { $0.card.agreementKey == row.key }.map { (peer: $0, everySecret: row.everySecret) } }
    }

    /// The one way a piece leaves this holder, over the LAN or through relays: writes its
    /// piece of `secret` for `peer` into `output` (requester index `index`, 0 for a requester
    /// that holds no share; the key share sealed to `recipientKey`) and records the release
    /// with its `decision`.
    public func release(_ secret: StoredSecret, to peer: Peer, index: Int, sealedTo recipientKey: [UInt8], decision: ReleaseDecision,
                        identity: Identity, output: OutputFile) throws {
        try ReleasedPiece.release(secret, toIndex: index, sealedTo: recipientKey, keystore: self, identity: identity, output: output)
        try recordRelease(secretID: secret.header.secretID, peer: peer, requester: index, decision: decision)
    }

    /// Records a release decision for `secretID`.
    public func recordRelease(secretID: [UInt8], peer: Peer, requester: Int, decision: ReleaseDecision, detail: String? = nil) throws(VaultError) {
        try recordRelease(secretID: secretID, peerKey: peer.card.agreementKey, peerLabel: peer.label.value, requester: requester,
                          decision: decision, detail: detail)
    }

    /// Records a decision for `secretID` about a peer known by its key and a label (an
    /// emergency rule's trustee, who need not be trusted here).
    public func recordRelease(secretID: [UInt8], peerKey: [UInt8], peerLabel: String, requester: Int, decision: ReleaseDecision,
                              detail: String? = nil) throws(VaultError) {
        try write { db in
            try db.execute(sql: """
                INSERT INTO release_log (secret_id, peer_key, peer_label, requester, at, decision, detail) VALUES (?, ?, ?, ?, ?, ?, ?)
                """, arguments: [Data(secretID), Data(peerKey), peerLabel, requester, Int64(VaultClock.now().timeIntervalSince1970), decision.rawValue, detail])
        }
    }

    /// Every decision recorded for `secretID`, oldest first.
    public func releaseRecord(secretID: [UInt8]) throws(VaultError) -> [ReleaseRecord] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT peer_label, requester, at, decision, detail FROM release_log WHERE secret_id = ? ORDER BY at, id",
                             arguments: [Data(secretID)]).compactMap { row -> ReleaseRecord? in
                guard let decision = ReleaseDecision(rawValue: row["decision"]) else { return nil }
                return ReleaseRecord(peerLabel: row["peer_label"], requester: row["requester"],
                              at: Date(timeIntervalSince1970: TimeInterval(row["at"] as Int64)),
                              decision: decision, detail: row["detail"])
            }
        }
    }
}
