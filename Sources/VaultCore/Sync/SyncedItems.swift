import Foundation
import GRDB

/// Item commands on a shared key that is synced (`vault key sync`): each is a change signed
/// by its author, applied here at once and published at the next `vault sync`. On a key
/// that is not synced they act on this keystore alone, as before.
extension Keystore {
    /// Adds an item (``addItem(_:metadata:content:itemKey:password:scrypt:random:)``); on a
    /// synced key, as a change signed by `author`.
    public func addItem(_ header: ItemHeader, metadata: SecretMetadata, content: inout some ByteSource, itemKey: SecureBytes,
                        password: SecureBytes?, scrypt: ScryptParameters, author: Identity?) throws -> StoredItem {
        guard let author = try signer(for: header.keyID, author) else {
            return try addItem(header, metadata: metadata, content: &content, itemKey: itemKey, password: password, scrypt: scrypt)
        }
        return try Self.storage(on: home.directory) {
            try database.write { db in
                var stored: StoredItem?
                try authorChange(.put, item: header.itemID, keyID: header.keyID, supersedes: [], author: author, db) { id, version in
                    stored = try sealItem(header, metadata: metadata, content: &content, itemKey: itemKey, password: password,
                                          scrypt: scrypt, random: SecureRandom(), db, id: id, version: version)
                    return stored
                }
                return stored!
            }
        }
    }

    /// Copies an item under another key (``copyItem(_:itemKey:to:newItemKey:)``); into a
    /// synced key, as a new item signed by `author`.
    public func copyItem(_ item: StoredItem, itemKey: SecureBytes, to newHeader: ItemHeader, newItemKey: SecureBytes,
                         author: Identity?) throws -> StoredItem {
        guard let author = try signer(for: newHeader.keyID, author) else {
            return try copyItem(item, itemKey: itemKey, to: newHeader, newItemKey: newItemKey)
        }
        return try Self.storage(on: home.directory) {
            try database.write { db in
                var stored: StoredItem?
                try authorChange(.put, item: newHeader.itemID, keyID: newHeader.keyID, supersedes: [], author: author, db) { id, version in
                    stored = try resealItem(item.id, size: item.size, itemKey: itemKey, as: newHeader, newItemKey: newItemKey, db,
                                            id: id, version: version)
                    return stored
                }
                return stored!
            }
        }
    }

    /// Imports an exported item (``importItem(_:streamLength:from:key:markNew:)``); under a
    /// synced key, as a new item signed by `author`, who vouches for it to the others.
    public func importItem(_ header: ItemHeader, streamLength: UInt64, from source: inout some ByteSource, key: SecureBytes,
                           author: Identity?) throws -> StoredItem {
        guard let author = try signer(for: header.keyID, author) else {
            return try importItem(header, streamLength: streamLength, from: &source, key: key)
        }
        return try Self.storage(on: home.directory) {
            try database.write { db in
                var stored: StoredItem?
                try authorChange(.put, item: header.itemID, keyID: header.keyID, supersedes: [], author: author, db) { id, version in
                    stored = try storeItem(header, streamLength: streamLength, from: &source, key: key, markNew: true, db, id: id, version: version)
                    return stored
                }
                return stored!
            }
        }
    }

    /// Replaces an item's content and/or public fields, keeping its id (`vault item edit`):
    /// `newHeader` is ``ItemHeader/edited(title:description:passwordProtected:)`` of the
    /// item's, and `content` new content (with `metadata` and `password`), or nil to carry
    /// the old payload over under the new header. On a synced key this is a change signed by
    /// `author`; editing a conflict copy makes it the item, in place of the version it lost to.
    public func editItem(_ item: StoredItem, itemKey: SecureBytes, newHeader: ItemHeader, newItemKey: SecureBytes,
                         content: (metadata: SecretMetadata, source: any ByteSource, password: SecureBytes?)?, scrypt: ScryptParameters,
                         author: Identity?) throws -> StoredItem {
        precondition(newHeader.itemID == item.header.itemID && newHeader.keyID == item.header.keyID && newHeader.type == item.header.type)
        precondition(content != nil || newHeader.passwordProtected == item.header.passwordProtected)
        let author = try signer(for: item.header.keyID, author)
        return try Self.storage(on: home.directory) {
            try database.write { db in
                // The old rows are moved aside first: a synced change deletes the version it
                // supersedes before the new one is written from it.
                let parked = try park(item.id, db)
                func write(_ id: [UInt8], _ version: ItemVersion?) throws -> StoredItem {
                    guard let content else {
                        return try resealItem(parked, size: item.size, itemKey: itemKey, as: newHeader, newItemKey: newItemKey, db,
                                              id: id, version: version)
                    }
                    var source = content.source
                    return try sealItem(newHeader, metadata: content.metadata, content: &source, itemKey: newItemKey,
                                        password: content.password, scrypt: scrypt, random: SecureRandom(), db, id: id, version: version)
                }
                var stored: StoredItem?
                if let author {
                    try authorChange(.put, item: item.header.itemID, keyID: item.header.keyID,
                                     supersedes: try superseded(by: item, db), author: author, db) { id, version in
                        stored = try write(id, version)
                        return stored
                    }
                } else {
                    stored = try write(item.header.itemID, nil)
                }
                try db.execute(sql: "DELETE FROM item WHERE id = ?", arguments: [Data(parked)])
                return stored!
            }
        }
    }

    /// Removes an item. On a synced key, as a change signed by `author`: the item is
    /// deleted everywhere; a conflict copy is dropped and the item stays as it is.
    public func removeItem(_ item: StoredItem, author: Identity?) throws {
        guard let author = try signer(for: item.header.keyID, author) else { return try removeItem(item) }
        try Self.storage(on: home.directory) {
            try database.write { db in
                let itemID = item.header.itemID
                guard item.isConflict, let winner = try heads(item: itemID, db).winner, winner.operation == .put else {
                    // The item itself, or a copy beside a deletion: a delete of what was seen.
                    try authorChange(.delete, item: itemID, keyID: item.header.keyID, supersedes: try superseded(by: item, db),
                                     author: author, db) { _, _ in nil }
                    return
                }
                // Dropping a copy keeps the current version: it is stated again, as a change
                // that has seen both, so that every holder drops the same copy.
                let parked = try park(itemID, db)
                try authorChange(.put, item: itemID, keyID: item.header.keyID, supersedes: [winner.version, item.version!],
                                 author: author, db) { id, version in
                    try moveItemRow(parked, to: id, db)
                    return try setVersion(version, of: id, db)
                }
            }
        }
    }

    /// Ties shared key `keyID` to relay group `groupID` (`vault key sync`): from now on its
    /// item commands are signed changes, and every item it has is stated once, by `author`,
    /// so that the other holders get it. One transaction.
    ///
    /// `arriving` names, by item id, the content hashes of changes about to be applied (the
    /// message that made this machine start syncing the key). An item held here whose
    /// export is one of them is a copy of that version, exported by hand before the key was
    /// synced: it is dropped rather than stated, so it does not come back as a conflict copy
    /// of itself. Its content is kept through that version.
    public func startSync(keyID: [UInt8], group groupID: [UInt8], lifetime: UInt64, minimumRelays: Int, author: Identity,
                          arriving: [[UInt8]: Set<[UInt8]>] = [:]) throws {
        precondition(lifetime > 0 && minimumRelays > 0)
        let items = try items(keyID: keyID).filter { $0.version == nil }
        try Self.storage(on: home.directory) {
            try database.write { db in
                try db.execute(sql: """
                    INSERT INTO key_sync (key_id, group_id, lifetime, min_relays, since) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (key_id) DO UPDATE SET group_id = excluded.group_id, lifetime = excluded.lifetime, min_relays = excluded.min_relays
                    """, arguments: [Data(keyID), Data(groupID), Int64(lifetime), minimumRelays, Int64(VaultClock.now().timeIntervalSince1970)])
                for item in items {
                    if let hashes = arriving[item.header.itemID] {
                        let hasher = SHA256Hasher()
                        try exportItem(item, db) { hasher.update($0) }
                        if hashes.contains(hasher.finish()) {
                            try db.execute(sql: "DELETE FROM item WHERE id = ?", arguments: [Data(item.id)])
                            continue
                        }
                    }
                    let parked = try park(item.id, db)
                    try authorChange(.put, item: item.header.itemID, keyID: keyID, supersedes: [], author: author, db) { id, version in
                        try moveItemRow(parked, to: id, db)
                        return try setVersion(version, of: id, db)
                    }
                }
            }
        }
    }

    /// `author` when `keyID` is synced (nil when it is not); an error when it is synced and
    /// no one signs.
    private func signer(for keyID: [UInt8], _ author: Identity?) throws(VaultError) -> Identity? {
        guard try syncGroup(keyID: keyID) != nil else { return nil }
        guard let author else { throw .unexpected("the key is synced: its changes must be signed") }
        return author
    }

    /// What a change to `item` has seen: the current version, and the copy itself when it is
    /// a conflict copy.
    private func superseded(by item: StoredItem, _ db: Database) throws -> [ItemVersion] {
        let winner = try heads(item: item.header.itemID, db).winner?.version
        return Array(Set([winner, item.isConflict ? item.version : nil].compactMap { $0 })).sorted()
    }

    /// Marks row `id` as holding `version`, and returns it.
    private func setVersion(_ version: ItemVersion, of id: [UInt8], _ db: Database) throws -> StoredItem? {
        try db.execute(sql: "UPDATE item SET version_counter = ?, version_author = ? WHERE id = ?",
                       arguments: [Int64(version.counter), Data(version.author), Data(id)])
        return try Row.fetchOne(db, sql: "SELECT * FROM item WHERE id = ?", arguments: [Data(id)]).map(StoredItem.init(row:))
    }

    /// Moves a row to a fresh id, out of the way of the change about to be made.
    private func park(_ id: [UInt8], _ db: Database) throws -> [UInt8] {
        let parked = SecureRandom().bytes(16)
        try db.execute(sql: "PRAGMA defer_foreign_keys = ON")
        try moveItemRow(id, to: parked, db)
        return parked
    }
}
