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
/// SQLite's write lock, it is renamed to its final name and the directory is fsynced; the
/// commit makes it part of the keystore. A process killed before the rename leaves a
/// transient file, swept once that process is gone; killed after it, an unreferenced final
/// file, which ``sweepPieceFiles()`` removes under the same write lock, so a sweep never
/// races an insert in progress. A removal deletes the row first and the file after the
/// commit. Either way the keystore as SQLite holds it is the whole truth.
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

    /// Removes piece files that no row references: those of a process killed between the
    /// rename and the commit, or between a removal's commit and its unlink. Each is checked
    /// again under SQLite's write lock, which an insert holds from before its rename to its
    /// commit. Read-only callers never write: the lock is taken only when a file looks
    /// orphaned.
    func sweepPieceFiles() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: piecesDirectory) else { return }
        let files = names.filter { $0.hasSuffix(".vshare") && !$0.hasPrefix(".") }
        guard !files.isEmpty, let held = try? referencedPieceFiles(database) else { return }
        let unreferenced = files.filter { !held.contains($0) }
        guard !unreferenced.isEmpty else { return }
        removeUnreferencedPieceFiles(unreferenced)
    }

    /// Unlinks those of `names` that no row references, checked under the write lock.
    func removeUnreferencedPieceFiles(_ names: [String]) {
        try? database.writeWithoutTransaction { db in
            try db.inTransaction(.immediate) {
                let held = try referencedPieceFiles(db)
                for name in names where !held.contains(name) { unlink(piecesDirectory + "/" + name) }
                return .commit
            }
        }
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
