import Foundation
import GRDB

/// An item this keystore holds, encrypted in full.
public struct StoredItem: Sendable {
    /// Where it is kept: the item's id, or for a conflict copy of a synced item an id of its
    /// own (``Keystore/conflictID(item:version:)``).
    public let id: [UInt8]
    /// The public header.
    public let header: ItemHeader
    /// Bytes of content (the plaintext, without its encrypted fields).
    public let size: UInt64
    /// Bytes of the encrypted stream.
    public let streamLength: UInt64
    /// Imported from someone else and not opened yet.
    public let isNew: Bool
    /// When it was stored here.
    public let storedAt: Date
    /// Under a synced key: the change whose content this is.
    public let version: ItemVersion?
    /// Stored from a change while its key was locked: its origin is checked, its content is
    /// opened at the next sync with the key unlocked.
    public let unopened: Bool

    /// The id as 32 hex digits.
    public var idHex: String { id.hex }
    /// A concurrent edit of the item that lost to its current version, kept beside it.
    public var isConflict: Bool { id != header.itemID }

    init(row: Row) throws {
        id = [UInt8](row["id"] as Data)
        header = try ItemHeader(parsing: [UInt8](row["header"] as Data))
        let author = (row["version_author"] as Data?).map { [UInt8]($0) }
        version = author.flatMap { author in (row["version_counter"] as Int64?).map { ItemVersion(counter: UInt64($0), author: author) } }
        unopened = (row["unopened"] as Int) == 1
        size = UInt64(row["size"] as Int64)
        streamLength = UInt64(row["stream_length"] as Int64)
        isNew = (row["is_new"] as Int) == 1
        storedAt = Date(timeIntervalSince1970: TimeInterval(row["stored_at"] as Int64))
    }
}

extension Keystore {
    /// Items are stored as consecutive rows of this many bytes.
    static let itemRowLength = 1 << 20

    /// Encrypts `content` (with `metadata`) under `itemKey`, inside a password layer when
    /// `password` is given (the header must say so), and stores the item, streaming it in
    /// 64 KiB chunks into rows, all in one transaction: nothing of a failed add stays.
    public func addItem(_ header: ItemHeader, metadata: SecretMetadata, content: inout some ByteSource, itemKey: SecureBytes,
                        password: SecureBytes? = nil, scrypt: ScryptParameters = .default,
                        random: some RandomSource = SecureRandom()) throws -> StoredItem {
        try Self.storage(on: home.directory) {
            try database.write { db in
                try sealItem(header, metadata: metadata, content: &content, itemKey: itemKey, password: password, scrypt: scrypt,
                             random: random, db)
            }
        }
    }

    /// Encrypts and stores an item in the caller's transaction, under `id` (by default its
    /// own) and, for a synced item, the version it is.
    func sealItem(_ header: ItemHeader, metadata: SecretMetadata, content: inout some ByteSource, itemKey: SecureBytes,
                  password: SecureBytes?, scrypt: ScryptParameters, random: some RandomSource, _ db: Database,
                  id: [UInt8]? = nil, version: ItemVersion? = nil) throws -> StoredItem {
        let rows = try ItemRows(db: db, itemID: id ?? header.itemID)
        let size = try ItemCrypto.sealStream(header, metadata: metadata, content: &content, itemKey: itemKey, password: password,
                                             scrypt: scrypt, random: random, emit: rows.write)
        try rows.flush()
        return try insert(header, size: size, streamLength: rows.total, isNew: false, db, id: id, version: version)
    }

    /// Reads an exported item's header (§13) from `source`, leaving it at the stream, and
    /// checks that the item is not here already.
    public func readItemHeader(_ source: inout some ByteSource) throws -> (header: ItemHeader, streamLength: UInt64) {
        let (header, streamLength) = try ItemCrypto.readHeader(&source)
        if try item(id: header.itemID) != nil { throw VaultError.duplicateItem(id: header.itemIDHex) }
        return (header, streamLength)
    }

    /// Imports the rest of an exported item, after ``readItemHeader(_:)``: the whole stream
    /// is decrypted under `key` and checked, and only then is the item stored, marked new
    /// (or not, for an item its user just opened). Plaintext is counted and dropped, never kept.
    public func importItem(_ header: ItemHeader, streamLength: UInt64, from source: inout some ByteSource,
                           key: SecureBytes, markNew: Bool = true) throws -> StoredItem {
        try Self.storage(on: home.directory) {
            try database.write { db in
                try storeItem(header, streamLength: streamLength, from: &source, key: key, markNew: markNew, db)
            }
        }
    }

    /// Streams an item's `streamLength` stream bytes from `source` into rows, in the
    /// caller's transaction. With `key`, the stream is decrypted and checked on the way
    /// (plaintext counted and dropped); without it the item is stored unopened, to be
    /// checked when its key is unlocked. Nothing may follow the stream in `source`.
    func storeItem(_ header: ItemHeader, streamLength: UInt64, from source: inout some ByteSource, key: SecureBytes?, markNew: Bool,
                   _ db: Database, id: [UInt8]? = nil, version: ItemVersion? = nil) throws -> StoredItem {
        // An application's object holds one value of at most Keystore.maximumAppValue bytes,
        // whoever wrote it: another holder's change that carries more is refused before any of
        // it is stored (its fields may add a little; the JSON is checked when an app reads it).
        if AppObjectName(header) != nil, (SecretStream.plaintextLength(sealed: streamLength) ?? .max) > UInt64(Self.maximumAppValue + 65_536) {
            throw VaultError.invalidAppObject("a value received is larger than the \(ByteCount.limit(UInt64(Self.maximumAppValue))) an object may have")
        }
        let rows = try ItemRows(db: db, itemID: id ?? header.itemID)
        let check = ImportCheck(header)
        let opener = key.map { StreamOpener(key: $0, emit: check.write) }
        var left = streamLength
        do {
            while left > 0 {
                let chunk = try source.readFully(Int(min(left, UInt64(SecretStream.sealedChunkLength))))
                guard !chunk.isEmpty else { throw ItemInput.truncated(streamLength: streamLength, left: left) }
                try rows.write(chunk)
                try opener.map { opener in try chunk.withUnsafeBytes { try opener.write($0) } }
                left -= UInt64(chunk.count)
            }
            guard try source.readFully(1).isEmpty else { throw ItemInput.trailingBytes }
            try opener?.finish()
            if opener != nil { try check.finish() }
        } catch {
            throw Self.openingFailure(error)
        }
        try rows.flush()
        // Unopened, the size known is the stream's: the content's is learnt when it opens.
        let size = opener == nil ? SecretStream.plaintextLength(sealed: streamLength) ?? 0 : check.size
        return try insert(header, size: size, streamLength: streamLength, isNew: markNew, db, id: id, version: version,
                          unopened: opener == nil)
    }

    /// Decrypts a stored item: `metadataReady` gets its encrypted fields, then `content`
    /// its content, only as authenticated chunks. Marks it opened, unless `marking` is false
    /// (a reader of many items marks them at once, ``markOpened(_:)``).
    @discardableResult
    /// `password` is asked only when the item has a password layer.
    public func openItem(_ item: StoredItem, itemKey: SecureBytes,
                         password: @escaping () throws -> SecureBytes = { throw VaultError.passwordRequired },
                         metadataReady: @escaping (SecretMetadata) throws -> Void = { _ in }, marking: Bool = true,
                         content: @escaping (UnsafeRawBufferPointer) throws -> Void) throws -> SecretMetadata {
        let metadata = try withItemStream(item) { source in
            try ItemCrypto.openStream(item.header, source: &source, itemKey: itemKey, password: password,
                                      metadataReady: metadataReady, content: content)
        }
        if marking { try markOpened([item]) }
        return metadata
    }

    /// Marks items as opened (no longer new), in one transaction.
    public func markOpened(_ items: [StoredItem]) throws(VaultError) {
        let marked = items.filter { $0.isNew || $0.unopened }
        guard !marked.isEmpty else { return }
        try write { db in
            for item in marked { try db.execute(sql: "UPDATE item SET is_new = 0, unopened = 0 WHERE id = ?", arguments: [Data(item.id)]) }
        }
    }

    /// Re-encrypts an item under another key as a new item (`newHeader`), streaming.
    public func copyItem(_ item: StoredItem, itemKey: SecureBytes, to newHeader: ItemHeader, newItemKey: SecureBytes) throws -> StoredItem {
        precondition(newHeader.type == item.header.type)
        return try Self.storage(on: home.directory) {
            try database.write { db in try resealItem(item.id, size: item.size, itemKey: itemKey, as: newHeader, newItemKey: newItemKey, db) }
        }
    }

    /// Re-encrypts the stream stored under `sourceID` for `newHeader` (another key, or
    /// the same item with a new title), as a new row `id` (by default the header's), in the
    /// caller's transaction. The payload inside, password layer included, is carried as it is.
    func resealItem(_ sourceID: [UInt8], size: UInt64, itemKey: SecureBytes, as newHeader: ItemHeader, newItemKey: SecureBytes,
                    _ db: Database, id: [UInt8]? = nil, version: ItemVersion? = nil) throws -> StoredItem {
        let rows = try ItemRows(db: db, itemID: id ?? newHeader.itemID)
        let sealer = try StreamSealer(key: newItemKey, emit: rows.write)
        try openStoredStream(sourceID, itemKey: itemKey, db, emit: sealer.write)
        try sealer.finish()
        try rows.flush()
        return try insert(newHeader, size: size, streamLength: rows.total, isNew: false, db, id: id, version: version)
    }

    /// Opens the stream stored under row `id` with `itemKey`, in the caller's transaction:
    /// only authenticated plaintext reaches `emit`.
    func openStoredStream(_ id: [UInt8], itemKey: SecureBytes, _ db: Database, emit: @escaping (UnsafeRawBufferPointer) throws -> Void) throws {
        var source = try BlobRows(db: db, sql: "SELECT data FROM item_chunk WHERE item_id = ? ORDER BY seq", id: id)
        let opener = StreamOpener(key: itemKey, emit: emit)
        do {
            try source.forEachChunk(of: SecretStream.sealedChunkLength, opener.write)
            try opener.finish()
        } catch {
            throw Self.openingFailure(error)
        }
    }

    /// Writes the item's export (§13) to `emit`, streaming.
    public func exportItem(_ item: StoredItem, to emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        try Self.storage(on: home.directory) {
            try database.read { db in try exportItem(item, db, to: emit) }
        }
    }

    /// An item's export, from inside a transaction.
    func exportItem(_ item: StoredItem, _ db: Database, to emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        try ItemExport.prefix(item.header, streamLength: item.streamLength).withUnsafeBytes { try emit($0) }
        var source = try BlobRows(db: db, sql: "SELECT data FROM item_chunk WHERE item_id = ? ORDER BY seq", id: item.id)
        try source.forEachChunk(emit)
    }

    /// Every item, newest first, or only those under `keyID`.
    public func items(keyID: [UInt8]? = nil) throws(VaultError) -> [StoredItem] {
        try read { db in
            if let keyID {
                return try Row.fetchAll(db, sql: "SELECT * FROM item WHERE key_id = ? ORDER BY stored_at DESC, id",
                                        arguments: [Data(keyID)]).map(StoredItem.init(row:))
            }
            return try Row.fetchAll(db, sql: "SELECT * FROM item ORDER BY stored_at DESC, id").map(StoredItem.init(row:))
        }
    }

    /// The item whose id starts with these hex digits (at least 4).
    public func item(matching text: String) throws(VaultError) -> StoredItem {
        let hex = text.lowercased()
        guard hex.count >= 4, hex.allSatisfy(\.isHexDigit) else { throw .unknownItem(text) }
        let all = try items()
        // An item's id names it before any conflict copy whose own id shares the digits.
        if let exact = all.first(where: { $0.idHex == hex }) { return exact }
        let matches = all.filter { $0.idHex.hasPrefix(hex) }
        guard matches.count <= 1 else { throw .ambiguousItem(text) }
        guard let found = matches.first else { throw .unknownItem(text) }
        return found
    }

    /// Deletes an item.
    public func removeItem(_ item: StoredItem) throws(VaultError) {
        try write { db in try db.execute(sql: "DELETE FROM item WHERE id = ?", arguments: [Data(item.id)]) }
    }

    func item(id: [UInt8]) throws(VaultError) -> StoredItem? {
        try read { db in try Row.fetchOne(db, sql: "SELECT * FROM item WHERE id = ?", arguments: [Data(id)]).map(StoredItem.init(row:)) }
    }

    /// A stream that fails to authenticate, or a payload that contradicts its header, is
    /// one failure to the user: the item was altered or is under another key.
    static func openingFailure(_ error: Error) -> Error {
        switch error {
        case is SecretStream.Failure, VaultError.corruptSecret: VaultError.itemDoesNotOpen
        default: error
        }
    }

    private func withItemStream<T>(_ item: StoredItem, _ body: (inout BlobRows) throws -> T) throws -> T {
        try Self.storage(on: home.directory) {
            try database.read { db in
                var source = try BlobRows(db: db, sql: "SELECT data FROM item_chunk WHERE item_id = ? ORDER BY seq", id: item.id)
                return try body(&source)
            }
        }
    }

    func insert(_ header: ItemHeader, size: UInt64, streamLength: UInt64, isNew: Bool, _ db: Database, id: [UInt8]? = nil,
                version: ItemVersion? = nil, unopened: Bool = false) throws -> StoredItem {
        let id = id ?? header.itemID
        try db.execute(
            sql: """
                INSERT INTO item (id, key_id, header, size, stream_length, is_new, stored_at, version_counter, version_author, unopened)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [Data(id), Data(header.keyID), Data(header.encoded()), Int64(size), Int64(streamLength),
                        isNew ? 1 : 0, Int64(VaultClock.now().timeIntervalSince1970), version.map { Int64($0.counter) },
                        version.map { Data($0.author) }, unopened ? 1 : 0])
        try noteAppObject(header, db)
        return try StoredItem(row: Row.fetchOne(db, sql: "SELECT * FROM item WHERE id = ?", arguments: [Data(id)])!)
    }
}

/// What an import can check of the plaintext without a password: the layer byte agrees
/// with the header, and without a password layer the payload parses and its type is the
/// header's. The size is the content's, or with a password layer the payload's (its
/// encrypted fields included), which is all that can be known.
final class ImportCheck {
    private let header: ItemHeader
    private var prefix: [UInt8] = []
    private var parser: PayloadParser?
    private var innerBytes: UInt64 = 0
    private(set) var size: UInt64 = 0

    init(_ header: ItemHeader) { self.header = header }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        let needed = header.passwordProtected ? 2 + PasswordLayer.saltLength : 1
        while prefix.count < needed && offset < bytes.count {
            prefix.append(bytes[offset])
            offset += 1
            guard prefix[0] == (header.passwordProtected ? PasswordLayer.scrypt : PasswordLayer.none) else {
                throw VaultError.corruptSecret("its password layer contradicts its header")
            }
            if prefix.count == needed && !header.passwordProtected {
                parser = PayloadParser(expectedType: header.type.rawValue) { [unowned self] in size += UInt64($0.count) }
            }
        }
        guard offset < bytes.count else { return }
        let rest = UnsafeRawBufferPointer(rebasing: bytes[offset...])
        if let parser { try parser.write(rest) } else { innerBytes += UInt64(rest.count) }
    }

    func finish() throws {
        if let parser { return try parser.finish() }
        guard header.passwordProtected, prefix.count == 2 + PasswordLayer.saltLength,
              let payload = SecretStream.plaintextLength(sealed: innerBytes) else {
            throw VaultError.corruptSecret("its password layer is incomplete")
        }
        _ = try ScryptParameters(logN: prefix[1])
        size = payload
    }
}

/// Collects a stream into `item_chunk` rows of ``Keystore/itemRowLength`` bytes.
/// The item row itself is inserted last, once its size is known: the transaction defers
/// the foreign key check to its commit.
final class ItemRows {
    private let db: Database
    private let itemID: Data
    private var buffer: [UInt8] = []
    private var sequence = 0
    private(set) var total: UInt64 = 0

    init(db: Database, itemID: [UInt8]) throws {
        try db.execute(sql: "PRAGMA defer_foreign_keys = ON")
        self.db = db
        self.itemID = Data(itemID)
        buffer.reserveCapacity(Keystore.itemRowLength)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        buffer += bytes
        total += UInt64(bytes.count)
        if buffer.count >= Keystore.itemRowLength { try flush() }
    }

    func write(_ bytes: [UInt8]) throws { try bytes.withUnsafeBytes { try write($0) } }

    /// Writes what is buffered as one row.
    func flush() throws {
        guard !buffer.isEmpty else { return }
        try db.execute(sql: "INSERT INTO item_chunk (item_id, seq, data) VALUES (?, ?, ?)", arguments: [itemID, sequence, Data(buffer)])
        sequence += 1
        buffer.removeAll(keepingCapacity: true)
    }
}

/// An item stream stored as consecutive blob rows, read row by row.
final class BlobRows: ByteSource {
    private let cursor: RowCursor
    private var current: [UInt8] = []
    private var offset = 0

    init(db: Database, sql: String, id: [UInt8]) throws {
        cursor = try Row.fetchCursor(db, sql: sql, arguments: [Data(id)])
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        if offset == current.count {
            guard let row = try cursor.next() else { return 0 }
            current = [UInt8](row[0] as Data)
            offset = 0
        }
        let count = min(buffer.count, current.count - offset)
        current.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + offset, byteCount: count) }
        offset += count
        return count
    }
}
