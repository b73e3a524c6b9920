import Foundation
import GRDB

/// Where the pieces of stored shares live: one file per share, `pieces/ROWID.vshare` in the
/// vault directory (ROWID is ``BundleHeader/rowID`` in hex), holding the bundle as it was
/// dealt: signed header, sealed keys, piece. Its `secret` row is the reference: a file is
/// part of the keystore exactly while its row exists.
///
/// A piece is 1/k of its secret, any size. In SQLite it cost a copy into blob rows and the
/// WAL's second write of every page; as a file, the dealer's own bundle and a bundle
/// received over the network take their place by a rename, written once.
///
/// Crash safety rests on one order. A file is written under a transient name and fsynced.
/// Then, inside the transaction that inserts its row and after that insert has taken
/// SQLite's write lock, it is marked (`NAME.pending`, an empty file), renamed to its final
/// name, and the directory is fsynced; the commit makes it part of the keystore, and the
/// mark goes after it. A process killed before the rename leaves a transient file, swept
/// once that process is gone; killed after it, an unreferenced final file with its mark,
/// which ``sweepPieceFiles()`` removes under the same write lock, so a sweep never races an
/// insert in progress. A removal marks the file in the transaction that deletes its row, and
/// deletes the file after the commit. Either way the keystore as SQLite holds it is the
/// whole truth.
///
/// Only a marked file is ever swept. An unreferenced file without a mark is no crash's
/// leftover: the database was lost, emptied, or put back from an older backup, and the file
/// may be the only copy of a share (a bundle: `vault secrets import` takes back a copy of
/// it made outside the folder).
/// Until 2026-11-29 the sweep removed every unreferenced file, so the first command after
/// an empty database (or the one `vault init` made in its place) deleted every share held
/// (found by a review). ``unlistedPieceFiles()`` names them instead.
extension Keystore {
    /// The folder of piece files.
    var piecesDirectory: String { home.directory + "/pieces" }

    /// The piece file of a stored share.
    func pieceFile(_ header: BundleHeader) -> String { piecesDirectory + "/\(header.rowID.hex).vshare" }

    /// A new transient file for a bundle this keystore is about to keep (the dealer's own,
    /// or one received): ``storeOwnBundle(at:identity:name:)`` and
    /// ``storeDeliveredBundle(at:identity:)`` then move it into place without a copy.
    public func newBundleFile() throws(VaultError) -> OutputFile {
        try ensurePiecesDirectory()
        return try home.transientFile("vshare", in: piecesDirectory)
    }

    func ensurePiecesDirectory() throws(VaultError) {
        try Self.ensureDirectory(piecesDirectory)
    }

    /// Makes `path` (mode 0700) if it is missing, durably: its parent is fsynced after.
    static func ensureDirectory(_ path: String) throws(VaultError) {
        if mkdir(path, 0o700) != 0 {
            guard errno == EEXIST else { throw .fileSystem(path: path, errno: errno) }
            return
        }
        let parent = PathText.directory(of: path)
        try sync(parent, shownAs: parent)
    }

    /// Flushes a file, or a directory's entries (a rename or a new name is durable only
    /// then), to the disk; errors name it `shownAs`.
    static func sync(_ path: String, shownAs name: String) throws(VaultError) {
        let fd = Foundation.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .fileSystem(path: name, errno: errno) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw .fileSystem(path: name, errno: errno) }
    }

    /// Runs `body` with this share's piece, read from its file in bounded memory.
    func withPiece<T>(_ secret: StoredSecret, _ body: (inout any ByteSource) throws -> T) throws -> T {
        let (file, offset) = try pieceFile(of: secret)
        do {
            try file.skip(offset)
        } catch {
            throw VaultError.keystoreCorrupt("the piece file of share \(secret.header.secretIDHex.prefix(16)) cannot be read (\(VaultError.words(for: error)))")
        }
        var source: any ByteSource = file
        return try body(&source)
    }

    /// The stored piece's file, once its size is checked, and where the piece starts in it.
    func pieceFile(of secret: StoredSecret) throws -> (file: FileSource, offset: UInt64) {
        let file: FileSource
        do {
            file = try FileSource(path: pieceFile(secret.header))
        } catch {
            throw VaultError.keystoreCorrupt("the piece file of share \(secret.header.secretIDHex.prefix(16)) cannot be read (\(VaultError.words(for: error)))")
        }
        // The length is checked before any byte is used; the commitment checks the bytes.
        guard file.size == ShareBundle.length(prefixLength: secret.prefixLength, header: secret.header) else {
            throw VaultError.keystoreCorrupt("the piece file of share \(secret.header.secretIDHex.prefix(16)) has the wrong size")
        }
        return (file, UInt64(secret.prefixLength + ShareBundle.bodyPrefixLength))
    }

    /// The mark of a piece file in flux: made under the write lock before its row is
    /// inserted or deleted, removed after the commit.
    static let pendingMark = ".pending"

    /// Marks the piece file `path` (a full path) as in flux, in the transaction that
    /// inserts or deletes its row: killed before the mark goes, the sweep decides by the row.
    /// Returns whether this call made the mark (false: one was there, left by a process cut
    /// short, which stays for the sweep; or, with `missingFolderIsNothing`, no folder).
    @discardableResult
    func markPending(_ path: String, missingFolderIsNothing: Bool = false) throws(VaultError) -> Bool {
        let fd = Foundation.open(path + Self.pendingMark, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == EEXIST || (missingFolderIsNothing && errno == ENOENT) { return false }
            throw .fileSystem(path: piecesDirectory, errno: errno)
        }
        close(fd)
        return true
    }

    /// Removes the marks of `paths` (full paths of piece files) after their commit.
    func unmarkPending(_ paths: [String]) {
        for path in paths { unlink(path + Self.pendingMark) }
    }

    /// Settles the piece files a process left marked: killed between a rename and its
    /// commit, or between a removal's commit and its unlink. Each is decided under SQLite's
    /// write lock, which an insert or removal holds from its mark to its commit. Read-only
    /// callers never write: the lock is taken only when a mark is there.
    func sweepPieceFiles() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: piecesDirectory) else { return }
        let marked = names.filter { $0.hasSuffix(".vshare" + Self.pendingMark) && !$0.hasPrefix(".") }
            .map { String($0.dropLast(Self.pendingMark.count)) }
        guard !marked.isEmpty else { return }
        removeUnreferencedPieceFiles(marked)
    }

    /// Unlinks those of `names` that no row references, checked under the write lock, and
    /// their marks.
    func removeUnreferencedPieceFiles(_ names: [String]) {
        try? database.writeWithoutTransaction { db in
            try db.inTransaction(.immediate) {
                let held = try referencedPieceFiles(db)
                for name in names where !held.contains(name) { unlink(piecesDirectory + "/" + name) }
                unmarkPending(names.map { piecesDirectory + "/" + $0 })
                return .commit
            }
        }
    }

    /// Piece files that no share of this keystore lists, nor marks in flux: left by a
    /// keystore database that was lost, emptied or put back from an older backup. Each is a
    /// share bundle, kept; `vault secrets import` takes back a copy of one sealed to this
    /// identity (not the file itself, ``importBundles(_:identity:progress:)`` says why).
    public func unlistedPieceFiles() throws(VaultError) -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: piecesDirectory) else { return [] }
        let files = Set(names.filter { $0.hasSuffix(".vshare") && !$0.hasPrefix(".") })
        let marked = Set(names.filter { $0.hasSuffix(".vshare" + Self.pendingMark) }.map { String($0.dropLast(Self.pendingMark.count)) })
        let held = try read { db in try referencedPieceFiles(db) }
        return files.subtracting(held).subtracting(marked).sorted().map { piecesDirectory + "/" + $0 }
    }

    private func referencedPieceFiles(_ reader: some DatabaseReader) throws -> Set<String> {
        try reader.read { try referencedPieceFiles($0) }
    }

    private func referencedPieceFiles(_ db: Database) throws -> Set<String> {
        Set(try Data.fetchAll(db, sql: "SELECT id FROM secret").map { [UInt8]($0).hex + ".vshare" })
    }

    /// Flushes the folder's entries (a rename is durable only then).
    func syncPiecesDirectory() throws(VaultError) {
        try Self.sync(piecesDirectory, shownAs: piecesDirectory)
    }
}
