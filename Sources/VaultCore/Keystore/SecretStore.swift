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
    package let box: [UInt8]
    /// The bundle's signed prefix (§9), as the dealer made it.
    package let prefix: [UInt8]
    /// Where the sealed keys start in the piece file.
    var prefixLength: Int { prefix.count }

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
        self.prefix = prefix
    }
}

extension BundleHeader {
    /// The header of the share bundle at `path`, as far as it can be read without a
    /// keystore (its format and fields; the signature and the seal are checked later): lets
    /// a command refuse a missing, truncated or foreign file before it asks for anything.
    public static func read(bundleAt path: String) throws(VaultError) -> BundleHeader {
        do {
            var source = try FileSource(path: path)
            return try ShareBundle.parsePrefix { try source.readFully($0) }.0
        } catch {
            throw VaultError.wrapping(error).about(file: path)
        }
    }
}

extension Keystore {
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
                throw VaultError.wrapping(error).about(file: path)
            }
        }
    }

    /// Imports share bundles, all or none, after checking each one as far as a holder can
    /// alone: the dealer's signature and trust, that it is sealed to this identity, the
    /// sealed keys bound to the header, the piece against the dealer's commitment and the
    /// key share against the proof-of-possession key. A refusal names
    /// the file (``VaultError/about(file:)``). The files are copied: they stay as they are.
    @discardableResult
    public func importBundles(_ paths: [String], identity: Identity, progress: ProgressMeter? = nil) throws(VaultError) -> [StoredSecret] {
        let peers = try peers()
        // A file of the pieces folder itself (one no row lists, taken back) would be written
        // over by its own copy, and lost with it should the import then fail.
        var folder = stat()
        if stat(piecesDirectory, &folder) == 0 {
            for path in paths {
                var parent = stat()
                let directory = PathText.directory(of: path)
                if stat(directory.isEmpty ? "." : directory, &parent) == 0, parent.st_dev == folder.st_dev, parent.st_ino == folder.st_ino {
                    throw .fileSystem(path: path, reason: "is in this keystore's pieces folder, which the import writes to: copy it elsewhere first")
                }
            }
        }
        let files = try paths.map { path throws(VaultError) in try FileSource(path: path) }
        progress?.expect(files.reduce(0) { $0 + ($1.size ?? 0) })
        var staged: [StagedBundle] = []
        do {
            for (path, file) in zip(paths, files) {
                do {
                    var source = MeteredSource(file, meter: progress)
                    staged.append(try stage(copying: &source, identity: identity, trusted: peers))
                } catch {
                    throw VaultError.wrapping(error).about(file: path)
                }
            }
        } catch {
            for bundle in staged { unlink(bundle.path) }
            throw .wrapping(error)
        }
        return try keep(staged, identity: identity, role: .holder, names: paths.map { _ in nil }, trusted: peers) { index, error in
            error.about(file: paths[index])
        }
    }

    /// Stores the dealer's own bundle, just written to `path` (best from ``newBundleFile()``),
    /// under an optional local name. The file moves into the keystore: it is gone afterwards,
    /// stored or not. Its piece is not hashed again: the dealer's commitment was computed
    /// from these very bytes as they were written.
    public func storeOwnBundle(at path: String, identity: Identity, name: Label?) throws(VaultError) -> StoredSecret {
        let staged: StagedBundle
        do { staged = try stage(moving: path, identity: identity, trusted: [], checkPiece: false) } catch { throw .wrapping(error) }
        return try keep([staged], identity: identity, role: .dealer, names: [name], trusted: []) { $1 }[0]
    }

    /// Stores a bundle received from its dealer into `path` (from ``newBundleFile()``), after
    /// every check ``importBundles(_:identity:progress:)`` makes. The file moves into the
    /// keystore: it is gone afterwards, stored or not.
    public func storeDeliveredBundle(at path: String, identity: Identity) throws(VaultError) -> StoredSecret {
        let peers = try peers()
        let staged: StagedBundle
        do { staged = try stage(moving: path, identity: identity, trusted: peers, checkPiece: true) } catch { throw .wrapping(error) }
        return try keep([staged], identity: identity, role: .holder, names: [nil], trusted: peers) { $1 }[0]
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
            // Durable before the row goes, as an insert's is before its row comes. Without
            // a pieces folder there is no file to mark, nor to leave behind.
            if try markPending(pieceFile(secret.header), missingFolderIsNothing: true) { try syncPiecesDirectory() }
            try db.execute(sql: "DELETE FROM secret WHERE id = ?", arguments: [Data(secret.header.rowID)])
            try db.execute(sql: "DELETE FROM auto_release WHERE secret_id = ?", arguments: [Data(secret.header.secretID)])
            if orphaned, let keyID = secret.header.keyID {
                try db.execute(sql: "DELETE FROM item WHERE key_id = ?", arguments: [Data(keyID)])
            }
        }
        // After the commit, and only if no row took the name again meanwhile (the same share
        // delivered anew): a crash in between leaves a marked file no row references, which
        // the next open sweeps (PieceFiles.swift).
        removeUnreferencedPieceFiles([(pieceFile(secret.header) as NSString).lastPathComponent])
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

    /// A bundle checked as far as its holder can, fsynced under a transient name in the
    /// pieces folder, waiting for its row (PieceFiles.swift gives the order).
    private struct StagedBundle {
        let header: BundleHeader
        let prefix: [UInt8]
        let box: [UInt8]
        let path: String
    }

    /// A bundle's head: its prefix, verified, and its sealed keys, opened. A bundle this
    /// keystore would not keep is refused here, before its piece is read; the transaction
    /// that keeps it checks again.
    private func readHead(_ source: inout some ByteSource, identity: Identity, trusted: [Peer])
        throws -> (header: BundleHeader, prefix: [UInt8], box: [UInt8], keyShare: SecureBytes) {
        let (header, prefix) = try ShareBundle.parsePrefix { try source.readFully($0) }
        try read { db in try self.check(header, identity: identity, trusted: trusted, db) }
        let box = try source.readFully(ShareBundle.bodyPrefixLength)
        guard box.count == ShareBundle.bodyPrefixLength else { throw VaultError.truncated(what: "the share bundle") }
        let keyShare = try ShareBundle.openBox(box, header: header, holder: identity)
        guard header.keyShareMatches(index: header.holderIndex, keyShare: keyShare) else {
            throw VaultError.malformed(what: "the share bundle", detail: "its key share does not match the dealer's proof key")
        }
        return (header, prefix, box, keyShare)
    }

    /// Copies a bundle into a new piece file, checking it on the way.
    private func stage(copying source: inout some ByteSource, identity: Identity, trusted: [Peer]) throws -> StagedBundle {
        let head = try readHead(&source, identity: identity, trusted: trusted)
        let file = try newBundleFile()
        try (head.prefix + head.box).withUnsafeBytes { try file.write($0) }
        var writeFailure: VaultError?
        try Self.checkPiece(of: source, header: head.header) { bytes in
            // A write failure (a full disk) is kept and thrown once the piece is read.
            do throws(VaultError) { try file.write(bytes) } catch { writeFailure = writeFailure ?? error }
        }
        if let writeFailure { throw writeFailure }
        try file.commit()
        return StagedBundle(header: head.header, prefix: head.prefix, box: head.box, path: file.path)
    }

    /// Moves a bundle file this process wrote into the pieces folder and checks it there;
    /// the file is gone afterwards, staged or not. `checkPiece` false trusts the piece's
    /// bytes (the dealer's own, hashed as they were written) and checks only its length.
    private func stage(moving path: String, identity: Identity, trusted: [Peer], checkPiece: Bool) throws -> StagedBundle {
        try ensurePiecesDirectory()
        var staged = path
        if PathText.directory(of: path) != piecesDirectory {
            staged = piecesDirectory + "/" + VaultHome.transientFileName("vshare")
            guard rename(path, staged) == 0 else {
                // Another file system: copied instead (vault's own callers write in the folder).
                let failure = errno
                defer { unlink(path) }
                guard failure == EXDEV else { throw VaultError.fileSystem(path: piecesDirectory, errno: failure) }
                var source = try FileSource(path: path)
                return try stage(copying: &source, identity: identity, trusted: trusted)
            }
        }
        do {
            var source = try FileSource(path: staged)
            let head = try readHead(&source, identity: identity, trusted: trusted)
            if checkPiece {
                try Self.checkPiece(of: source, header: head.header)
            } else {
                guard source.size == ShareBundle.length(prefixLength: head.prefix.count, header: head.header) else {
                    throw VaultError.malformed(what: "the share bundle", detail: "its piece has the wrong length")
                }
            }
            // Durable before any row refers to it.
            try Self.sync(staged, shownAs: piecesDirectory)
            return StagedBundle(header: head.header, prefix: head.prefix, box: head.box, path: staged)
        } catch {
            unlink(staged)
            throw error
        }
    }

    /// Gives staged bundles their rows and their final names, in one transaction: all or
    /// none. `named(i, error)` is the error to throw for bundle i's refusal.
    private func keep(
        _ staged: [StagedBundle], identity: Identity, role: StoredSecret.Role, names: [Label?], trusted: [Peer],
        named: (Int, VaultError) -> VaultError
    ) throws(VaultError) -> [StoredSecret] {
        do {
            let kept = try write { db in
                // Renamed files are removed here, under the write lock, should anything fail:
                // once it is released, another process may give the same name a row.
                var renamed: [String] = [], marked: [String] = []
                do {
                    let stored = try staged.enumerated().map { index, bundle in
                        do {
                            return try self.insert(bundle, role: role, name: names[index], identity: identity, trusted: trusted, db,
                                                   marked: { marked.append($0) }, renamed: { renamed.append($0) })
                        } catch {
                            throw named(index, VaultError.wrapping(error))
                        }
                    }
                    try self.syncPiecesDirectory()
                    return (stored: stored, marked: marked)
                } catch {
                    for path in renamed { unlink(path) }
                    // Only this insert's own marks: one a crashed removal left is the sweep's.
                    self.unmarkPending(marked)
                    throw error
                }
            }
            // Committed: the files are the rows' now.
            unmarkPending(kept.marked)
            return kept.stored
        } catch {
            // Transient names are this process's own. A commit that failed after the renames
            // leaves final names without rows, for the sweep.
            for bundle in staged { unlink(bundle.path) }
            throw error
        }
    }

    /// Inserts one staged bundle's row, then renames its file: the insert holds SQLite's write
    /// lock from here to the commit, so no sweep sees the file without its row.
    private func insert(
        _ bundle: StagedBundle, role: StoredSecret.Role, name: Label?, identity: Identity, trusted: [Peer], _ db: Database,
        marked: (String) -> Void, renamed: (String) -> Void
    ) throws -> StoredSecret {
        let header = bundle.header
        try check(header, identity: identity, trusted: trusted, db)
        if let name, try Int.fetchOne(db, sql: "SELECT count(*) FROM secret WHERE name_key = ?", arguments: [name.key]) ?? 0 > 0 {
            throw VaultError.invalidSecret("a secret named '\(name)' exists already")
        }
        try db.execute(
            sql: "INSERT INTO secret (id, name, name_key, role, prefix, box, stored_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            arguments: [Data(header.rowID), name?.value, name?.key, role.rawValue, Data(bundle.prefix), Data(bundle.box),
                        Int64(VaultClock.now().timeIntervalSince1970)])
        let final = pieceFile(header)
        if try markPending(final) { marked(final) }
        guard rename(bundle.path, final) == 0 else { throw VaultError.fileSystem(path: piecesDirectory, errno: errno) }
        renamed(final)
        return try StoredSecret(row: Row.fetchOne(db, sql: "SELECT * FROM secret WHERE id = ?", arguments: [Data(header.rowID)])!)
    }

    /// Reads a bundle's piece to its end, which must be the file's, and checks it against
    /// the dealer's commitment; `observe` sees every byte on the way.
    private static func checkPiece(of source: some ByteSource, header: BundleHeader,
                                   observe: @escaping (UnsafeRawBufferPointer) -> Void = { _ in }) throws {
        let hasher = header.commitmentHasher()
        let reader = PieceReader(source: source, length: header.pieceLength) { bytes in
            hasher.update(bytes)
            observe(bytes)
        }
        do {
            try reader.drain()
        } catch VaultError.truncated {
            throw VaultError.truncated(what: "the share bundle")
        } catch VaultError.malformed {
            throw VaultError.malformed(what: "the share bundle", detail: "bytes follow the piece")
        }
        guard Sodium.equal(hasher.finish(), header.commitments[header.holderIndex - 1]) else {
            throw VaultError.malformed(what: "the share bundle", detail: "its piece does not match the dealer's commitment")
        }
    }
}

extension BundleHeader {
    /// The keystore's key for this share: the secret id together with its dealer.
    ///
    /// A secret id is the dealer's random choice, so only the dealer vouches for it. Keyed
    /// by the id alone, a co-holder who saw a bundle could deliver one of its own under the
    /// same id first, and the real one would be refused as a duplicate.
    public var rowID: [UInt8] { Self.rowID(dealer: dealer, secretID: secretID) }

    /// The keystore's key for the share of (`dealer`, `secretID`).
    public static func rowID(dealer: KeyCard, secretID: [UInt8]) -> [UInt8] {
        Sodium.blake2b(outputLength: 16, key: "vault/v1/secret-row", dealer.agreementKey, dealer.signingKey, secretID)
    }
}
