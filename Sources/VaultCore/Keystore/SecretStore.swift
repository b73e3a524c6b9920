import Foundation
import GRDB

/// A share this keystore holds.
public struct StoredSecret: Sendable {
    /// Whether this machine dealt the secret or received a share of it.
    public enum Role: Int, Sendable {
        case holder = 0
        case dealer = 1
    }

    /// The verified, signed header.
    public let header: BundleHeader
    /// The local name, if any.
    public let name: String?
    /// Dealer or holder.
    public let role: Role
    /// When the share was stored.
    public let storedAt: Date
    let box: [UInt8]

    init(row: Row) throws {
        let prefix = [UInt8](row["prefix"] as Data)
        var offset = 0
        // Stored prefixes were verified on import; parsing again keeps one code path.
        (header, _) = try ShareBundle.parsePrefix { count in
            defer { offset += count }
            return Array(prefix[offset..<min(prefix.count, offset + count)])
        }
        name = row["name"]
        role = Role(rawValue: row["role"]) ?? .holder
        storedAt = Date(timeIntervalSince1970: TimeInterval(row["stored_at"] as Int64))
        box = [UInt8](row["box"] as Data)
    }
}

extension Keystore {
    /// Pieces are stored as consecutive rows of this many bytes.
    static let pieceRowLength = 1 << 20

    /// The headers of share bundles, each checked as far as its header allows (the dealer's
    /// signature and trust, sealed to this identity, not held here yet) without storing
    /// anything: what a holder is shown before agreeing to keep them. ``importBundles``
    /// checks everything again, and the pieces too.
    public func bundleHeaders(_ paths: [String], identity: Identity) throws(VaultError) -> [BundleHeader] {
        let peers = try peers()
        return try paths.map { path throws(VaultError) in
            do {
                var source = try FileSource(path: path)
                let (header, _) = try ShareBundle.parsePrefix { try source.readFully($0) }
                try read { db in try self.check(header, identity: identity, trusted: peers, db) }
                return header
            } catch {
                throw Self.refusal(VaultError.wrapping(error), of: path, among: paths.count)
            }
        }
    }

    /// A refused bundle's error: of several, named by its file (a file-system error names
    /// it already).
    private static func refusal(_ error: VaultError, of path: String, among count: Int) -> VaultError {
        if case .fileSystem = error { return error }
        return count > 1 ? .inFile(path: path, error) : error
    }

    /// Imports share bundles, all or none, after checking each one as far as a holder can
    /// alone: the dealer's signature and trust, that it is sealed to this identity, the
    /// sealed keys bound to the header, the piece against the dealer's commitment and the
    /// key share against the proof-of-possession key. Of several bundles, a refusal names
    /// the file (``VaultError/inFile(path:_:)``).
    @discardableResult
    public func importBundles(_ paths: [String], identity: Identity, progress: ProgressMeter? = nil) throws(VaultError) -> [StoredSecret] {
        let peers = try peers()
        let files = try paths.map { path throws(VaultError) in try FileSource(path: path) }
        progress?.expect(files.reduce(0) { $0 + ($1.size ?? 0) })
        return try write { db in
            try zip(paths, files).map { path, file in
                do {
                    var source = MeteredSource(file, meter: progress)
                    return try self.store(&source, identity: identity, role: .holder, name: nil, trusted: peers, db)
                } catch let error as VaultError {
                    throw Self.refusal(error, of: path, among: paths.count)
                }
            }
        }
    }

    /// Stores the dealer's own bundle, just written, under an optional local name.
    public func storeOwnBundle(at path: String, identity: Identity, name: Label?) throws(VaultError) -> StoredSecret {
        try write { db in
            var source = try FileSource(path: path)
            return try self.store(&source, identity: identity, role: .dealer, name: name, trusted: [], db)
        }
    }

    /// Every stored secret, newest first.
    public func secrets() throws(VaultError) -> [StoredSecret] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM secret ORDER BY stored_at DESC, id").map(StoredSecret.init(row:))
        }
    }

    /// The secret with this local name, or whose id starts with these hex digits (at least 4).
    public func secret(matching text: String) throws(VaultError) -> StoredSecret {
        let all = try secrets()
        if let named = all.first(where: { $0.name?.lowercased() == text.lowercased() }) { return named }
        let hex = text.lowercased()
        guard hex.count >= 4, hex.allSatisfy(\.isHexDigit) else { throw .unknownSecret(text) }
        let matches = all.filter { $0.header.secretIDHex.hasPrefix(hex) }
        guard matches.count <= 1 else { throw .ambiguousSecret(text) }
        guard let found = matches.first else { throw .unknownSecret(text) }
        return found
    }

    /// Deletes a share and its piece, and, for the last share of a shared key, the items
    /// that key encrypts (they could never open again), in one transaction.
    public func removeSecret(_ secret: StoredSecret) throws(VaultError) {
        let orphaned = try itemsOrphaned(byRemoving: secret) > 0
        try write { db in
            try db.execute(sql: "DELETE FROM secret WHERE id = ?", arguments: [Data(secret.header.rowID)])
            try db.execute(sql: "DELETE FROM auto_release WHERE secret_id = ?", arguments: [Data(secret.header.secretID)])
            if orphaned, let keyID = secret.header.keyID {
                try db.execute(sql: "DELETE FROM item WHERE key_id = ?", arguments: [Data(keyID)])
            }
        }
    }

    /// Gives a stored secret a local name, or none.
    public func renameSecret(_ secret: StoredSecret, to name: Label?) throws(VaultError) {
        try write { db in
            if let name, try Int.fetchOne(db, sql: "SELECT count(*) FROM secret WHERE name_key = ? AND id != ?",
                                          arguments: [name.key, Data(secret.header.rowID)]) ?? 0 > 0 {
                throw VaultError.invalidSecret("a secret named '\(name)' exists already")
            }
            try db.execute(sql: "UPDATE secret SET name = ?, name_key = ? WHERE id = ?",
                           arguments: [name?.value, name?.key, Data(secret.header.rowID)])
        }
    }

    /// Moves `old`'s local name to `new` (resharing), in one transaction.
    public func moveName(from old: StoredSecret, to new: StoredSecret) throws(VaultError) {
        try write { db in
            let row = try Row.fetchOne(db, sql: "SELECT name, name_key FROM secret WHERE id = ?", arguments: [Data(old.header.rowID)])
            try db.execute(sql: "UPDATE secret SET name = NULL, name_key = NULL WHERE id = ?", arguments: [Data(old.header.rowID)])
            try db.execute(sql: "UPDATE secret SET name = ?, name_key = ? WHERE id = ?",
                           arguments: [row?["name"] as String?, row?["name_key"] as String?, Data(new.header.rowID)])
        }
    }

    /// Runs `body` with this share's piece, read from the keystore in bounded memory,
    /// inside one read transaction.
    func withPiece<T>(_ secret: StoredSecret, _ body: (inout any ByteSource) throws -> T) throws -> T {
        try Self.storage(on: home.directory) {
            try database.read { db in
                var source: any ByteSource = try BlobRows(db: db, sql: "SELECT data FROM secret_piece WHERE secret_id = ? ORDER BY seq",
                                                          id: secret.header.rowID)
                return try body(&source)
            }
        }
    }

    /// What a holder checks of a verified header before keeping its share: sealed to this
    /// identity, from a trusted dealer (or this identity), and not held here already.
    private func check(_ header: BundleHeader, identity: Identity, trusted: [Peer], _ db: Database) throws {
        guard Sodium.equal(header.holderKey, identity.card.agreementKey),
              header.index(of: identity.card.agreementKey) == header.holderIndex else {
            throw VaultError.notForThisIdentity(what: "the share bundle")
        }
        let dealerTrusted = header.dealer == identity.card || trusted.contains { $0.card == header.dealer }
        guard dealerTrusted else { throw VaultError.untrustedDealer(fingerprint: header.dealer.fingerprint) }
        if try Int.fetchOne(db, sql: "SELECT count(*) FROM secret WHERE id = ?", arguments: [Data(header.rowID)]) ?? 0 > 0 {
            throw VaultError.duplicateSecret(id: header.secretIDHex)
        }
    }

    private func store(
        _ source: inout some ByteSource, identity: Identity, role: StoredSecret.Role, name: Label?,
        trusted: [Peer], _ db: Database
    ) throws -> StoredSecret {
        let (header, prefix) = try ShareBundle.parsePrefix { try source.readFully($0) }
        try check(header, identity: identity, trusted: trusted, db)
        if let name, try Int.fetchOne(db, sql: "SELECT count(*) FROM secret WHERE name_key = ?", arguments: [name.key]) ?? 0 > 0 {
            throw VaultError.invalidSecret("a secret named '\(name)' exists already")
        }
        let box = try source.readFully(ShareBundle.bodyPrefixLength)
        guard box.count == ShareBundle.bodyPrefixLength else { throw VaultError.truncated(what: "the share bundle") }
        let keyShare = try ShareBundle.openBox(box, header: header, holder: identity)
        try db.execute(
            sql: "INSERT INTO secret (id, name, name_key, role, prefix, box, stored_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            arguments: [Data(header.rowID), name?.value, name?.key, role.rawValue, Data(prefix), Data(box),
                        Int64(Date().timeIntervalSince1970)])

        // Copy the piece into rows while hashing it to check it against the header.
        var left = Dispersal.pieceLength(dataLength: header.ciphertextLength, k: header.threshold)
        let hasher = BundleHeader.commitmentHasher()
        var sequence = 0
        while left > 0 {
            let chunk = try source.readFully(Int(min(left, UInt64(Self.pieceRowLength))))
            guard !chunk.isEmpty else { throw VaultError.truncated(what: "the share bundle") }
            chunk.withUnsafeBytes { hasher.update($0) }
            try db.execute(sql: "INSERT INTO secret_piece (secret_id, seq, data) VALUES (?, ?, ?)",
                           arguments: [Data(header.rowID), sequence, Data(chunk)])
            sequence += 1
            left -= UInt64(chunk.count)
        }
        guard try source.readFully(1).isEmpty else {
            throw VaultError.malformed(what: "the share bundle", detail: "bytes follow the piece")
        }
        let index = header.holderIndex
        guard Sodium.equal(hasher.finish(), header.commitments[index - 1]) else {
            throw VaultError.malformed(what: "the share bundle", detail: "its piece does not match the dealer's commitment")
        }
        let possession = BundleHeader.possessionKeyPair(secretID: header.secretID, index: index, keyShare: keyShare,
                                                        commitment: header.commitments[index - 1])
        guard possession.publicKey == header.possessionKeys[index - 1] else {
            throw VaultError.malformed(what: "the share bundle", detail: "its key share does not match the dealer's proof key")
        }
        return try StoredSecret(row: Row.fetchOne(db, sql: "SELECT * FROM secret WHERE id = ?", arguments: [Data(header.rowID)])!)
    }
}

/// A stream stored as consecutive blob rows (a piece, an item), read row by row.
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

extension BundleHeader {
    /// The keystore's key for this share: the secret id together with its dealer.
    ///
    /// A secret id is the dealer's random choice, so only the dealer vouches for it. Keyed
    /// by the id alone, a co-holder who saw a bundle could deliver one of its own under the
    /// same id first, and the real one would be refused as a duplicate.
    public var rowID: [UInt8] {
        Sodium.blake2b(outputLength: 16, key: "vault/v1/secret-row", dealer.agreementKey, dealer.signingKey, secretID)
    }
}
