import Foundation
import GRDB

/// One thing that happened to an application's object, in the order this keystore learnt
/// it (Docs/API.md, "Changes").
public struct AppEvent: Sendable {
    /// What happened.
    public enum Kind: Int, Sendable {
        /// The object has a new current value (the version's).
        case put = 1
        /// The object was deleted by the version.
        case delete = 2
        /// A concurrent write, made without seeing the current value, lost to it: its value
        /// is kept beside the object as a conflict copy until the next write to the object.
        case conflict = 3
    }

    /// Its place in this keystore's feed: events after a sequence number are what came since.
    public let sequence: Int64
    /// What happened.
    public let kind: Kind
    /// The object.
    public let name: AppObjectName
    /// The change that did it: its Lamport counter and author.
    public let version: ItemVersion
    /// Made on this machine (by an app, or by `vault item` commands), not received.
    public let isLocal: Bool
    /// When this keystore learnt it.
    public let date: Date
    /// The item row that holds the value of a put or a conflict copy; nil for a delete.
    public let item: StoredItem?
}

/// The feed of application events (migration v16-apps): recorded in the transaction of each
/// change to an application's object, read by apps after a cursor.
extension Keystore {
    /// The most events read at once.
    public static let appEventPage = 1000

    /// The last sequence number given to an event (0: none yet). An app that starts from the
    /// objects' current state reads the events after it.
    public func latestAppEvent() throws(VaultError) -> Int64 {
        try read { db in try Int64.fetchOne(db, sql: "SELECT max(seq) FROM app_event") ?? 0 }
    }

    /// The events of `app`'s objects under key `keyID` after sequence number `after`, oldest
    /// first, from a page of at most ``appEventPage``, and the last sequence number that
    /// page read (`after` when it read none): the next page starts after it. Only events
    /// that still describe an object are kept (a put that something later replaced is
    /// gone), so an app that was away reads what each object is now, not every step it
    /// took on the way.
    public func appEvents(app: String, keyID: [UInt8], after: Int64) throws(VaultError) -> (events: [AppEvent], through: Int64) {
        try read { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT e.seq, e.item_id, e.counter, e.author, e.kind, e.local, e.at, o.type, o.object
                FROM app_event e JOIN app_object o ON o.item_id = e.item_id
                WHERE o.key_id = ? AND o.app = ? AND e.seq > ? ORDER BY e.seq LIMIT ?
                """, arguments: [Data(keyID), app, after, Self.appEventPage])
            let through = rows.last.map { $0["seq"] as Int64 } ?? after
            return (try rows.compactMap { row -> AppEvent? in
                let itemID = [UInt8](row["item_id"] as Data)
                let version = ItemVersion(counter: UInt64(row["counter"] as Int64), author: [UInt8](row["author"] as Data))
                guard let kind = AppEvent.Kind(rawValue: row["kind"]),
                      let name = try? AppObjectName(app: app, type: row["type"], id: row["object"]) else { return nil }
                var item: StoredItem?
                if kind != .delete {
                    let id = kind == .put ? itemID : Self.conflictID(item: itemID, version: version)
                    // The row must still hold this version (the event is dropped with it, but
                    // a reader is told only what is there).
                    item = try Row.fetchOne(db, sql: "SELECT * FROM item WHERE id = ?", arguments: [Data(id)]).map(StoredItem.init(row:))
                    guard item?.version == version else { return nil }
                }
                return AppEvent(sequence: row["seq"], kind: kind, name: name, version: version, isLocal: (row["local"] as Int) == 1,
                                date: Date(timeIntervalSince1970: TimeInterval(row["at"] as Int64)), item: item)
            }, through)
        }
    }

    /// Where `app` left off reading the events of key `keyID` (0: the start).
    public func appCursor(app: String, keyID: [UInt8]) throws(VaultError) -> Int64 {
        try read { db in
            try Int64.fetchOne(db, sql: "SELECT seq FROM app_cursor WHERE app = ? AND key_id = ?", arguments: [app, Data(keyID)]) ?? 0
        }
    }

    /// Records that `app` has taken every event of key `keyID` up to `sequence`.
    public func setAppCursor(app: String, keyID: [UInt8], to sequence: Int64) throws(VaultError) {
        try write { db in
            try db.execute(sql: """
                INSERT INTO app_cursor (app, key_id, seq) VALUES (?, ?, ?)
                ON CONFLICT (app, key_id) DO UPDATE SET seq = max(seq, excluded.seq)
                """, arguments: [app, Data(keyID), sequence])
        }
    }

    // MARK: - Inside a transaction

    /// Notes that a stored item is an application's object (its title names an object whose
    /// derived id is the item's), so that a later delete, which carries no header, is known
    /// as that object's.
    func noteAppObject(_ header: ItemHeader, _ db: Database) throws {
        guard let name = AppObjectName(header) else { return }
        try db.execute(sql: "INSERT OR IGNORE INTO app_object (item_id, key_id, app, type, object) VALUES (?, ?, ?, ?, ?)",
                       arguments: [Data(header.itemID), Data(header.keyID), name.app, name.type, name.id])
    }

    /// Records what a change to item `itemID` did to it, if it is an application's object:
    /// a new winner is a put or a delete, a new conflict copy a conflict. Events that no
    /// longer describe the item (a put that lost its place, a copy dropped) are removed, so
    /// the feed holds at most an object's heads.
    func recordAppEvents(item itemID: [UInt8], before: ItemHeads, after: ItemHeads, local: Bool, _ db: Database) throws {
        guard try Int.fetchOne(db, sql: "SELECT count(*) FROM app_object WHERE item_id = ?", arguments: [Data(itemID)]) == 1 else { return }
        var events: [(AppEvent.Kind, ItemVersion)] = []
        if let winner = after.winner, winner.version != before.winner?.version {
            // A delete of what was already deleted (or never seen) tells an app nothing.
            if winner.operation == .put { events.append((.put, winner.version)) } else if !before.isDeleted { events.append((.delete, winner.version)) }
        }
        let copies = Set(before.conflicts.map(\.version))
        events += after.conflicts.filter { !copies.contains($0.version) }.map { (.conflict, $0.version) }
        // What still describes the item: a put or delete of its winner's version, a
        // conflict of each copy it keeps.
        func stillTrue(_ kind: AppEvent.Kind?, _ version: ItemVersion) -> Bool {
            switch kind {
            case .put?: after.winner?.operation == .put && after.winner?.version == version
            case .delete?: after.winner?.operation == .delete && after.winner?.version == version
            case .conflict?: after.conflicts.contains { $0.version == version }
            case nil: false
            }
        }
        for row in try Row.fetchAll(db, sql: "SELECT seq, kind, counter, author FROM app_event WHERE item_id = ?", arguments: [Data(itemID)]) {
            let version = ItemVersion(counter: UInt64(row["counter"] as Int64), author: [UInt8](row["author"] as Data))
            if !stillTrue(AppEvent.Kind(rawValue: row["kind"]), version) {
                try db.execute(sql: "DELETE FROM app_event WHERE seq = ?", arguments: [row["seq"] as Int64])
            }
        }
        for (kind, version) in events {
            try db.execute(sql: "INSERT INTO app_event (item_id, counter, author, kind, local, at) VALUES (?, ?, ?, ?, ?, ?)",
                           arguments: [Data(itemID), Int64(version.counter), Data(version.author), kind.rawValue, local ? 1 : 0,
                                       Int64(VaultClock.now().timeIntervalSince1970)])
        }
    }
}
