import Foundation
import GRDB

/// An application's object as this keystore holds it: its current value's item, or a
/// conflict copy's.
public struct AppObjectEntry: Sendable {
    /// The object.
    public let name: AppObjectName
    /// The item that holds the value (a note whose content is the value's JSON).
    public let item: StoredItem
    /// A concurrent write that lost to the current value, kept beside it.
    public var isConflict: Bool { item.isConflict }
}

/// Applications' objects on a synced shared key (Docs/API.md, FORMAT.md §22): each object is
/// a note of the key, whose content is the object's value as JSON, written and deleted as
/// signed item changes, so that `vault item list` shows it and `vault sync` carries it.
extension Keystore {
    /// The largest value an object may have, in bytes of JSON: objects are records, not
    /// files, and each one goes whole in every change message that carries it.
    public static let maximumAppValue = 1 << 20

    /// Checks that `value` is one JSON value (an object, array, string, number, true, false
    /// or null) within ``maximumAppValue`` bytes.
    public static func checkAppValue(_ value: [UInt8]) throws(VaultError) {
        guard value.count <= maximumAppValue else {
            throw .invalidAppObject("the value is \(value.count) bytes, more than the \(ByteCount.limit(UInt64(maximumAppValue))) an object may have")
        }
        guard (try? JSONSerialization.jsonObject(with: Data(value), options: [.fragmentsAllowed])) != nil else {
            throw .invalidAppObject("the value is not JSON")
        }
    }

    /// The header an object's next value is sealed under: the current one's (its creation
    /// time kept), or for a new object one with the derived id, created now. Its hash is what
    /// the agent derives the item key from.
    public func appHeader(for name: AppObjectName, keyID: [UInt8]) throws(VaultError) -> ItemHeader {
        let itemID = name.itemID(keyID: keyID)
        if let current = try item(id: itemID) { return current.header }
        return ItemHeader(itemID: itemID, keyID: keyID, createdAt: VaultClock.seconds(), type: .note,
                          passwordProtected: false, title: name.title, description: "")
    }

    /// Writes an object's value (JSON, checked by ``checkAppValue(_:)``) under `header`
    /// (``appHeader(for:keyID:)``), sealed with `itemKey`, as a change signed by `author`.
    /// The change supersedes every version of the object held here, its conflict copies
    /// too: an app writes an object knowing what it holds, and copies kept after a write
    /// would outlive every decision about them. One transaction. Returns the new version.
    @discardableResult
    public func putAppObject(_ header: ItemHeader, value: [UInt8], itemKey: SecureBytes, author: Identity) throws -> ItemVersion {
        try putAppObjects([(header, value, itemKey)], author: author)[0]
    }

    /// Writes several objects (``putAppObject(_:value:itemKey:author:)``) in one transaction:
    /// one disk flush for all of them, and all or none.
    public func putAppObjects(_ objects: [(header: ItemHeader, value: [UInt8], itemKey: SecureBytes)], author: Identity) throws -> [ItemVersion] {
        for object in objects {
            guard AppObjectName(object.header) != nil else { throw VaultError.invalidAppObject("the header does not name an object") }
            try Self.checkAppValue(object.value)
        }
        for keyID in Set(objects.map(\.header.keyID)) {
            guard try syncGroup(keyID: keyID) != nil else { throw VaultError.unexpected("an app writes only to a synced key") }
        }
        return try Self.storage(on: home.directory) {
            try database.write { db in
                try objects.map { header, value, itemKey in
                    let heads = try heads(item: header.itemID, db)
                    var content = BytesSource(value)
                    return try authorChange(.put, item: header.itemID, keyID: header.keyID,
                                            supersedes: heads.heads.prefix(ItemChange.maximumSuperseded).map(\.version), author: author,
                                            db) { id, version in
                        try sealItem(header, metadata: SecretMetadata(), content: &content, itemKey: itemKey, password: nil, scrypt: .default,
                                     random: SecureRandom(), db, id: id, version: version)
                    }.version
                }
            }
        }
    }

    /// Deletes an object, as a change signed by `author` that supersedes every version held
    /// here; returns its version, or nil when nothing of the object is held.
    @discardableResult
    public func deleteAppObject(_ name: AppObjectName, keyID: [UInt8], author: Identity) throws -> ItemVersion? {
        guard try syncGroup(keyID: keyID) != nil else { throw VaultError.unexpected("an app writes only to a synced key") }
        let itemID = name.itemID(keyID: keyID)
        return try Self.storage(on: home.directory) {
            try database.write { db in
                let heads = try heads(item: itemID, db)
                guard !heads.keptPuts.isEmpty else { return nil }
                return try authorChange(.delete, item: itemID, keyID: keyID, supersedes: heads.heads.prefix(ItemChange.maximumSuperseded).map(\.version),
                                        author: author, db) { _, _ in nil }.version
            }
        }
    }

    /// The object `name` as held here: its current value's item (nil when deleted or never
    /// seen) and its conflict copies.
    public func appObject(_ name: AppObjectName, keyID: [UInt8]) throws(VaultError) -> (current: StoredItem?, conflicts: [StoredItem]) {
        let itemID = name.itemID(keyID: keyID)
        return try read { db in
            let heads = try heads(item: itemID, db)
            func row(_ id: [UInt8]) throws -> StoredItem? {
                try Row.fetchOne(db, sql: "SELECT * FROM item WHERE id = ?", arguments: [Data(id)]).map(StoredItem.init(row:))
            }
            let current = heads.isDeleted ? nil : try row(itemID)
            let copies = try heads.conflicts.compactMap { try row(Self.conflictID(item: itemID, version: $0.version)) }
            return (current, copies)
        }
    }

    /// Every object of `app` under key `keyID` held here (of `type` only, if given): current
    /// values and conflict copies, by type and id.
    public func appObjects(app: String, keyID: [UInt8], type: String? = nil) throws(VaultError) -> [AppObjectEntry] {
        try items(keyID: keyID).compactMap { item -> AppObjectEntry? in
            guard let name = AppObjectName(item.header), name.app == app, type == nil || name.type == type else { return nil }
            return AppObjectEntry(name: name, item: item)
        }.sorted { ($0.name.type, $0.name.id, $0.isConflict ? 1 : 0) < ($1.name.type, $1.name.id, $1.isConflict ? 1 : 0) }
    }
}
