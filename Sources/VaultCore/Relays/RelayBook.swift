import Foundation
import GRDB

/// A relay this identity pinned: its URL and the card that must sign its answers.
public struct PinnedRelay: Sendable, Equatable {
    /// The name it was pinned under.
    public let label: Label
    /// Its base URL.
    public let url: String
    /// Its key card.
    public let card: KeyCard
}

/// A message kept in the relay outbox until every recipient confirmed it or it expired.
public struct SentMessage: Sendable, Equatable {
    /// Its id.
    public let id: [UInt8]
    /// Its group.
    public let group: [UInt8]
    /// How many shares (one a relay of the group when it was sent).
    public let shares: Int
    /// When the relays stop serving it.
    public let expiresAt: UInt64
}

/// Relays, groups and message numbering in the keystore (Docs/RELAY.md, "The client").
extension Keystore {
    /// Every pinned relay, by name.
    public func pinnedRelays() throws(VaultError) -> [PinnedRelay] {
        try read { db in try Row.fetchAll(db, sql: "SELECT * FROM relay ORDER BY label_key").map(Self.relay) }
    }

    /// The relay pinned under `name` (ignoring case).
    public func pinnedRelay(named name: String) throws(VaultError) -> PinnedRelay {
        let key = (try? Label(name))?.key ?? name
        return try read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM relay WHERE label_key = ?", arguments: [key]) else {
                throw VaultError.unknownRelay(name)
            }
            return try Self.relay(row)
        }
    }

    /// Pins a relay: from now on only answers signed by `card` are taken from `url`.
    public func pinRelay(label: Label, url: String, card: KeyCard) throws(VaultError) {
        let url = try RelayURL.check(url)
        try write { db in
            guard try Row.fetchOne(db, sql: "SELECT 1 FROM relay WHERE label_key = ?", arguments: [label.key]) == nil else {
                throw VaultError.duplicateRelay(label.value)
            }
            try db.execute(sql: "INSERT INTO relay (label, label_key, url, card, added_at) VALUES (?, ?, ?, ?, ?)",
                           arguments: [label.value, label.key, url, Data(card.encoded), Int64(VaultClock.now().timeIntervalSince1970)])
        }
    }

    /// Forgets a pinned relay.
    public func unpinRelay(named name: String) throws(VaultError) {
        let relay = try pinnedRelay(named: name)
        try write { db in try db.execute(sql: "DELETE FROM relay WHERE label_key = ?", arguments: [relay.label.key]) }
    }

    /// Every accepted group.
    public func groups() throws(VaultError) -> [GroupRecord] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT record FROM relay_group ORDER BY name_key, id").map { row throws -> GroupRecord in
                try GroupRecord(parsing: [UInt8](row[0] as Data))
            }
        }
    }

    /// The group named `name` (ignoring case), or whose id starts with `name` (hex).
    public func group(named name: String) throws(VaultError) -> GroupRecord {
        let key = (try? Label(name))?.key
        let matches = try groups().filter { $0.name.key == key || (name.count >= 4 && $0.idHex.hasPrefix(name.lowercased())) }
        guard let match = matches.first else { throw .unknownGroup(name) }
        guard matches.count == 1 else { throw .ambiguousGroup(name) }
        return match
    }

    /// The accepted group with this id, if any.
    public func group(id: [UInt8]) throws(VaultError) -> GroupRecord? {
        try read { db in
            try Data.fetchOne(db, sql: "SELECT record FROM relay_group WHERE id = ?", arguments: [Data(id)])
                .map { try GroupRecord(parsing: [UInt8]($0)) }
        }
    }

    /// The version of the accepted group with this id, if any: without parsing its record
    /// (its signature and every card), for a look at many groups on many relays.
    public func groupVersion(id: [UInt8]) throws(VaultError) -> UInt64? {
        try read { db in
            try Int64.fetchOne(db, sql: "SELECT version FROM relay_group WHERE id = ?", arguments: [Data(id)]).map { UInt64($0) }
        }
    }

    /// Accepts `record` when its owner is this identity or a trusted peer, and it is new or
    /// newer than the one kept. Returns whether it was stored. A record from an owner
    /// this identity does not trust is refused: whoever signs a group decides which relays
    /// its members pin.
    @discardableResult
    public func accept(group record: GroupRecord) throws(VaultError) -> Bool {
        try checkTaken(record)
        return try write { db in try Self.keep(db, record) }
    }

    /// Refuses `record` unless its owner is this identity or a trusted peer and it names
    /// this identity.
    func checkTaken(_ record: GroupRecord) throws(VaultError) {
        let own = try identityInfo().card
        let trusted = try peers().contains { $0.card == record.owner }
        guard record.owner == own || trusted else {
            throw .untrustedOwner(fingerprint: record.owner.fingerprint)
        }
        guard record.members.contains(where: { $0.card == own }) else { throw .notForThisIdentity(what: "the group record") }
    }

    /// Stores `record` unless the version kept is as new. Returns whether it was stored.
    ///
    /// A group's owner never changes: relays keep an id for the owner who registered it, and
    /// only that owner signs its versions. A record of a kept group from another owner, even
    /// a trusted one, is another group under the same id (a squatter's, or a mistake), and is
    /// refused: whichever relay answered first would otherwise decide whose group it is.
    static func keep(_ db: Database, _ record: GroupRecord) throws -> Bool {
        if let row = try Row.fetchOne(db, sql: "SELECT version, record FROM relay_group WHERE id = ?", arguments: [Data(record.id)]) {
            // A kept record that no longer parses names no owner to hold to: replaced.
            guard (try? GroupRecord(parsing: [UInt8](row[1] as Data)))?.owner ?? record.owner == record.owner else {
                throw VaultError.malformed(what: "the group record", detail: "its owner is not the owner of the group kept under its id")
            }
            guard UInt64(row[0] as Int64) < record.version else { return false }
        }
        try db.execute(sql: "INSERT OR REPLACE INTO relay_group (id, name, name_key, version, record) VALUES (?, ?, ?, ?, ?)",
                       arguments: [Data(record.id), record.name.value, record.name.key, Int64(record.version), Data(record.encoded)])
        return true
    }

    /// Forgets a group (on this machine only).
    public func forget(group id: [UInt8]) throws(VaultError) {
        try write { db in
            try db.execute(sql: "DELETE FROM relay_group WHERE id = ?", arguments: [Data(id)])
            try db.execute(sql: "DELETE FROM group_accepts WHERE group_id = ?", arguments: [Data(id)])
        }
    }

    /// The next sequence number for each recipient of a message in `group`, counted per
    /// recipient so that messages addressed to others leave no gap. A number is one
    /// message, or a gap, unless ``giveBack(group:recipients:)`` returns it.
    public func nextSequences(group: [UInt8], recipients: [KeyCard]) throws(VaultError) -> [UInt64] {
        try write { db in
            try recipients.map { card in
                let last = try Int64.fetchOne(db, sql: "SELECT last_sequence FROM message_sent WHERE group_id = ? AND recipient = ?",
                                              arguments: [Data(group), Data(card.signingKey)]) ?? 0
                try db.execute(sql: "INSERT OR REPLACE INTO message_sent (group_id, recipient, last_sequence) VALUES (?, ?, ?)",
                               arguments: [Data(group), Data(card.signingKey), last + 1])
                return UInt64(last + 1)
            }
        }
    }

    /// Gives back the numbers of a send that no recipient can read and no relay holds, so
    /// that it leaves no gap: each recipient's number is given back only while it is still
    /// the last one taken for that recipient (no later send took the next). One
    /// transaction. Returns the recipients whose numbers were given back.
    public func giveBack(group: [UInt8], recipients: [MessageRecipient]) throws(VaultError) -> [MessageRecipient] {
        try write { db in
            try recipients.filter { recipient in
                try db.execute(sql: """
                    UPDATE message_sent SET last_sequence = last_sequence - 1 WHERE group_id = ? AND recipient = ? AND last_sequence = ?
                    """, arguments: [Data(group), Data(recipient.card.signingKey), Int64(recipient.sequence)])
                return db.changesCount == 1
            }
        }
    }

    /// The last number taken for `recipient` in `group` (0: none).
    public func lastSequence(group: [UInt8], recipient: [UInt8]) throws(VaultError) -> UInt64 {
        try read { db in
            UInt64(try Int64.fetchOne(db, sql: "SELECT last_sequence FROM message_sent WHERE group_id = ? AND recipient = ?",
                                      arguments: [Data(group), Data(recipient)]) ?? 0)
        }
    }

    /// Whether the message with this id was already received.
    public func hasReceived(message id: [UInt8]) throws(VaultError) -> Bool {
        try read { db in try Bool.fetchOne(db, sql: "SELECT 1 FROM message_received WHERE message_id = ?", arguments: [Data(id)]) ?? false }
    }

    /// Whether `sender`'s number `sequence` (above 0) in `group` was already received.
    public func hasReceived(group: [UInt8], sender: [UInt8], sequence: UInt64) throws(VaultError) -> Bool {
        guard sequence > 0 else { return false }
        return try read { db in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM message_received WHERE group_id = ? AND sender = ? AND sequence = ?",
                              arguments: [Data(group), Data(sender), Int64(sequence)]) ?? false
        }
    }

    /// Records a received message; false when its id, or its sender's sequence number, was
    /// already received (a replay under a new id is a sender's number seen twice). Sequence
    /// 0 (a resend request) is outside the numbering: only its id counts.
    public func recordReceived(message header: MessageHeader, sequence: UInt64) throws(VaultError) -> Bool {
        try write { db in
            try db.execute(sql: """
                INSERT OR IGNORE INTO message_received (message_id, group_id, sender, sequence, received_at) VALUES (?, ?, ?, ?, ?)
                """, arguments: [Data(header.messageID), Data(header.groupID), Data(header.sender.signingKey), Int64(sequence),
                                 Int64(VaultClock.now().timeIntervalSince1970)])
            return db.changesCount == 1
        }
    }

    /// Records a received object message (outside any numbering: only its id counts);
    /// false when it was received already.
    public func recordReceived(object header: ObjectHeader) throws(VaultError) -> Bool {
        try write { db in
            try db.execute(sql: """
                INSERT OR IGNORE INTO message_received (message_id, group_id, sender, sequence, received_at) VALUES (?, ?, ?, 0, ?)
                """, arguments: [Data(header.messageID), Data(header.groupID), Data(header.sender.signingKey), Int64(VaultClock.now().timeIntervalSince1970)])
            return db.changesCount == 1
        }
    }

    /// Forgets that a message was received, when this machine could not keep what it
    /// carried (a full disk at its last step): the relays keep it, and the next run takes it.
    public func forgetReceived(message header: MessageHeader) throws(VaultError) {
        try write { db in
            try db.execute(sql: "DELETE FROM message_received WHERE message_id = ?", arguments: [Data(header.messageID)])
        }
    }

    /// Forgets that an object message was received, when this machine could not keep what
    /// it carried (a full disk): the relays keep it, and the next run takes it again.
    public func forgetReceived(object header: ObjectHeader) throws(VaultError) {
        try write { db in
            try db.execute(sql: "DELETE FROM message_received WHERE message_id = ? AND sequence = 0", arguments: [Data(header.messageID)])
        }
    }

    /// Of `sequences` missing from `sender`, those not asked for yet, or asked for at
    /// least `again` seconds before `now`; records them as asked now. A gap is asked for
    /// once while a request may still be on the relays: the sender answers it by resending,
    /// or by closing the numbers. A request lost or left unanswered (it expires from the
    /// relays after a day), or answered before senders could close numbers, is asked again.
    public func newResendRequests(group: [UInt8], sender: [UInt8], sequences: [UInt64], now: UInt64,
                                  again: UInt64) throws(VaultError) -> [UInt64] {
        try write { db in
            try sequences.filter { sequence in
                try db.execute(sql: """
                    INSERT INTO resend_requested (group_id, sender, sequence, requested_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (group_id, sender, sequence) DO UPDATE SET requested_at = excluded.requested_at
                    WHERE requested_at <= ?
                    """, arguments: [Data(group), Data(sender), Int64(sequence), Int64(now), Int64(now) - Int64(again)])
                return db.changesCount == 1
            }
        }
    }

    /// Forgets that `sequences` were asked for, so the next receive asks again (the request
    /// itself could not be sent).
    public func withdrawResendRequests(group: [UInt8], sender: [UInt8], sequences: [UInt64]) throws(VaultError) {
        try write { db in
            for sequence in sequences {
                try db.execute(sql: "DELETE FROM resend_requested WHERE group_id = ? AND sender = ? AND sequence = ?",
                               arguments: [Data(group), Data(sender), Int64(sequence)])
            }
        }
    }

    /// The sequence numbers from `sender` in `group` below its highest that never arrived
    /// and that the sender did not close; at most 1000.
    public func missingSequences(group: [UInt8], sender: [UInt8]) throws(VaultError) -> [UInt64] {
        let (seen, closed) = try read { db in
            (try Int64.fetchAll(db, sql: "SELECT sequence FROM message_received WHERE group_id = ? AND sender = ? AND sequence > 0 ORDER BY sequence",
                                arguments: [Data(group), Data(sender)]),
             Set(try Int64.fetchAll(db, sql: "SELECT sequence FROM message_closed WHERE group_id = ? AND sender = ?",
                                    arguments: [Data(group), Data(sender)])))
        }
        var missing: [UInt64] = []
        var expected: Int64 = 1
        for sequence in seen {
            while expected < sequence, missing.count < 1000 {
                if !closed.contains(expected) { missing.append(UInt64(expected)) }
                expected += 1
            }
            expected = sequence + 1
        }
        return missing
    }

    /// Records that `sender` closed `sequences` in `group`: it will not send them. Returns
    /// those newly closed that never arrived, which the caller reports once.
    public func closeNumbers(group: [UInt8], sender: [UInt8], sequences: [UInt64]) throws(VaultError) -> [UInt64] {
        try write { db in
            try sequences.filter { sequence in
                guard sequence > 0, sequence <= UInt64(Int64.max) else { return false }
                let received = try Bool.fetchOne(db, sql: "SELECT 1 FROM message_received WHERE group_id = ? AND sender = ? AND sequence = ?",
                                                 arguments: [Data(group), Data(sender), Int64(sequence)]) ?? false
                guard !received else { return false }
                try db.execute(sql: """
                    INSERT OR IGNORE INTO message_closed (group_id, sender, sequence, closed_at) VALUES (?, ?, ?, ?)
                    """, arguments: [Data(group), Data(sender), Int64(sequence), Int64(VaultClock.now().timeIntervalSince1970)])
                return db.changesCount == 1
            }
        }
    }

    /// Keeps a sent message in the relay outbox: its shares are in `relay-outbox/ID/` and
    /// each recipient's number says which request asks for it.
    public func keepSent(message id: [UInt8], group: [UInt8], shares: Int, expiresAt: UInt64,
                         recipients: [MessageRecipient]) throws(VaultError) {
        try write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO relay_outbox (message_id, group_id, shares, expires_at) VALUES (?, ?, ?, ?)",
                           arguments: [Data(id), Data(group), shares, Int64(expiresAt)])
            for recipient in recipients {
                try db.execute(sql: "INSERT OR REPLACE INTO relay_outbox_recipient (message_id, recipient, sequence) VALUES (?, ?, ?)",
                               arguments: [Data(id), Data(recipient.card.signingKey), Int64(recipient.sequence)])
            }
        }
    }

    /// The kept message that carried `sequence` to `recipient` in `group`, if it is still
    /// kept and has not expired.
    public func sentMessage(group: [UInt8], recipient: [UInt8], sequence: UInt64, now: UInt64) throws(VaultError) -> SentMessage? {
        try read { db in
            try Row.fetchOne(db, sql: """
                SELECT o.message_id, o.group_id, o.shares, o.expires_at FROM relay_outbox o
                JOIN relay_outbox_recipient r ON r.message_id = o.message_id
                WHERE o.group_id = ? AND r.recipient = ? AND r.sequence = ? AND o.expires_at > ?
                """, arguments: [Data(group), Data(recipient), Int64(sequence), Int64(now)]).map(Self.sent)
        }
    }

    /// Every kept message, oldest expiry first.
    public func sentMessages() throws(VaultError) -> [SentMessage] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT message_id, group_id, shares, expires_at FROM relay_outbox ORDER BY expires_at").map(Self.sent)
        }
    }

    /// Drops a kept message's row; its files are the caller's to remove.
    public func forgetSent(message id: [UInt8]) throws(VaultError) {
        try write { db in try db.execute(sql: "DELETE FROM relay_outbox WHERE message_id = ?", arguments: [Data(id)]) }
    }

    private static func sent(_ row: Row) -> SentMessage {
        SentMessage(id: [UInt8](row[0] as Data), group: [UInt8](row[1] as Data), shares: row[2], expiresAt: UInt64(row[3] as Int64))
    }

    private static func relay(_ row: Row) throws -> PinnedRelay {
        do {
            return PinnedRelay(label: try Label(row["label"] as String), url: row["url"], card: try KeyCard(encoded: [UInt8](row["card"] as Data)))
        } catch {
            throw VaultError.keystoreCorrupt("a pinned relay's row is invalid")
        }
    }
}
