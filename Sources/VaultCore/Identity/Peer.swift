import Foundation
import GRDB

/// Someone this machine trusts: a key card imported face to face, under a local label.
public struct Peer: Sendable, Equatable {
    /// The local name.
    public let label: Label
    /// The public keys.
    public let card: KeyCard
    /// Where to reach the peer when discovery is not available.
    public let address: PeerAddress?
    /// When the card was imported.
    public let addedAt: Date

    init(row: Row) throws {
        label = try Label(row["label"] as String)
        card = try KeyCard(encoded: [KeyCard.version] + [UInt8](row["agreement_key"] as Data)
            + [UInt8](row["signing_key"] as Data))
        address = try (row["address"] as String?).map { try PeerAddress($0) }
        addedAt = Date(timeIntervalSince1970: TimeInterval(row["added_at"] as Int64))
    }
}

extension Keystore {
    /// Every trusted peer, by label.
    public func peers() throws(VaultError) -> [Peer] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM peer ORDER BY label_key").map(Peer.init(row:))
        }
    }

    /// The peer with this label (ignoring case).
    public func peer(named name: String) throws(VaultError) -> Peer {
        let key = (try? Label(name))?.key ?? name
        return try read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM peer WHERE label_key = ?", arguments: [key]) else {
                throw VaultError.unknownPeer(name)
            }
            return try Peer(row: row)
        }
    }

    /// Checks that `card` could be added under `label`, without adding it: lets the CLI
    /// refuse before it asks the user to confirm.
    public func checkNewPeer(_ card: KeyCard, label: Label) throws(VaultError) {
        try read { db in try self.checkNewPeer(card, label: label, db) }
    }

    /// Trusts `card` under `label`. Refuses this machine's own card, a card already trusted
    /// and a label already taken.
    @discardableResult
    public func addPeer(_ card: KeyCard, label: Label, address: PeerAddress?) throws(VaultError) -> Peer {
        try write { db in
            try self.checkNewPeer(card, label: label, db)
            try db.execute(
                sql: """
                    INSERT INTO peer (label, label_key, agreement_key, signing_key, address, added_at)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [label.value, label.key, Data(card.agreementKey), Data(card.signingKey),
                            address?.description, Int64(VaultClock.now().timeIntervalSince1970)])
            return try Peer(row: Row.fetchOne(db, sql: "SELECT * FROM peer WHERE label_key = ?", arguments: [label.key])!)
        }
    }

    /// Gives a peer a new label.
    public func renamePeer(_ name: String, to newLabel: Label) throws(VaultError) {
        let old = try peer(named: name)
        try write { db in
            if old.label.key != newLabel.key,
               let taken = try String.fetchOne(db, sql: "SELECT label FROM peer WHERE label_key = ?", arguments: [newLabel.key]) {
                throw VaultError.duplicatePeerLabel(taken)
            }
            try db.execute(
                sql: "UPDATE peer SET label = ?, label_key = ? WHERE label_key = ?",
                arguments: [newLabel.value, newLabel.key, old.label.key])
            guard db.changesCount == 1 else { throw VaultError.unknownPeer(name) }
        }
    }

    /// Changes where a peer is reached (nil: nowhere stored, so discovery or `--peer`).
    @discardableResult
    public func setPeerAddress(_ name: String, to address: PeerAddress?) throws(VaultError) -> Peer {
        let old = try peer(named: name)
        return try write { db in
            try db.execute(sql: "UPDATE peer SET address = ? WHERE label_key = ?", arguments: [address?.description, old.label.key])
            guard db.changesCount == 1 else { throw VaultError.unknownPeer(name) }
            return try Peer(row: Row.fetchOne(db, sql: "SELECT * FROM peer WHERE label_key = ?", arguments: [old.label.key])!)
        }
    }

    /// Stops trusting a peer.
    public func removePeer(named name: String) throws(VaultError) {
        let old = try peer(named: name)
        try write { db in
            try db.execute(sql: "DELETE FROM peer WHERE label_key = ?", arguments: [old.label.key])
            guard db.changesCount == 1 else { throw VaultError.unknownPeer(name) }
            try db.execute(sql: "DELETE FROM auto_release WHERE peer_key = ?", arguments: [Data(old.card.agreementKey)])
        }
    }

    private func checkNewPeer(_ card: KeyCard, label: Label, _ db: Database) throws {
        if let own = try Data.fetchOne(db, sql: "SELECT card FROM identity WHERE id = 1"),
           let ownCard = try? KeyCard(encoded: [UInt8](own)),
           ownCard.agreementKey == card.agreementKey || ownCard.signingKey == card.signingKey {
            throw VaultError.ownCard
        }
        if let existing = try String.fetchOne(
            db, sql: "SELECT label FROM peer WHERE agreement_key = ? OR signing_key = ?",
            arguments: [Data(card.agreementKey), Data(card.signingKey)]) {
            throw VaultError.duplicatePeerKey(existingLabel: existing)
        }
        if let existing = try String.fetchOne(
            db, sql: "SELECT label FROM peer WHERE label_key = ?", arguments: [label.key]) {
            throw VaultError.duplicatePeerLabel(existing)
        }
    }
}
