import Foundation
import GRDB
import Testing
@testable import VaultCore
import VaultTestSupport

/// Issue 18: a stored share's piece is a file beside the keystore (PieceFiles.swift), named
/// by its row, written under a transient name, fsynced and renamed inside the transaction
/// that inserts its row.
@Suite struct PieceFileTests {
    let directory = TemporaryDirectory("vault-pieces")

    /// Alice deals 2-of-2 to Bob; alice's own bundle is written where the keystore keeps it.
    func deal(_ text: String = "a piece on its own", name: Label? = nil) throws
        -> (alice: Keystore, aliceID: Identity, bob: Keystore, bobID: Identity, own: StoredSecret, bobBundle: String) {
        let alice = try Keystore.create(home: VaultHome(directory: directory.file("alice")), label: Label("alice"), passphrase: nil)
        let bob = try Keystore.create(home: VaultHome(directory: directory.file("bob")), label: Label("bob"), passphrase: nil)
        let (aliceID, bobID) = (try alice.unlock(passphrase: nil), try bob.unlock(passphrase: nil))
        try alice.addPeer(bobID.card, label: bobID.label, address: nil)
        try bob.addPeer(aliceID.card, label: aliceID.label, address: nil)
        let request = ShareRequest(type: .note, threshold: 2, holders: [(label: bobID.label, card: bobID.card)])
        let outputs = [try alice.newBundleFile(), try OutputFile(path: directory.file("bob.vshare"))]
        let source = BytesSource(Array(text.utf8))
        _ = try SecretDealer.share(request, content: source, dealer: aliceID, outputs: outputs)
        try outputs[1].commit()
        let own = try alice.storeOwnBundle(at: outputs[0].path, identity: aliceID, name: name)
        #expect(!FileManager.default.fileExists(atPath: outputs[0].path), "the dealer's bundle moved, not copied")
        return (alice, aliceID, bob, bobID, own, outputs[1].path)
    }

    func names(in keystore: Keystore) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: keystore.piecesDirectory).sorted()
    }

    func mode(_ path: String) -> mode_t {
        var info = stat()
        #expect(stat(path, &info) == 0)
        return info.st_mode & 0o777
    }

    @Test func aStoredShareIsOneFileNamedByItsRowAndGoesWithIt() throws {
        let dealt = try deal()
        let file = dealt.alice.pieceFile(dealt.own.header)
        #expect(try names(in: dealt.alice) == [dealt.own.header.rowID.hex + ".vshare"])
        #expect(mode(file) == 0o600 && mode(dealt.alice.piecesDirectory) == 0o700)
        #expect(try dealt.alice.read { try $0.tableExists("secret_piece") } == false)
        // A holder's import copies: the bundle the user gave stays where it was.
        let held = try dealt.bob.importBundles([dealt.bobBundle], identity: dealt.bobID)[0]
        #expect(FileManager.default.fileExists(atPath: dealt.bobBundle))
        #expect(FileManager.default.contents(atPath: dealt.bob.pieceFile(held.header)) == FileManager.default.contents(atPath: dealt.bobBundle))
        try dealt.alice.removeSecret(dealt.own)
        #expect(try names(in: dealt.alice).isEmpty)
    }

    /// A process killed between the rename and the commit leaves a final name that no row
    /// references, marked; the next open removes it and its mark, and keeps every
    /// referenced file (a mark left after a commit goes, the file stays).
    @Test func aMarkedUnreferencedPieceFileIsSweptOnOpen() throws {
        let dealt = try deal()
        let orphan = dealt.alice.piecesDirectory + "/" + [UInt8](repeating: 0xab, count: 16).hex + ".vshare"
        #expect(FileManager.default.createFile(atPath: orphan, contents: Data([1, 2, 3])))
        try dealt.alice.markPending(orphan)
        try dealt.alice.markPending(dealt.alice.pieceFile(dealt.own.header))
        let other = dealt.alice.piecesDirectory + "/notes.txt"
        #expect(FileManager.default.createFile(atPath: other, contents: Data([1])))
        let reopened = try Keystore.open(home: dealt.alice.home)
        #expect(try names(in: reopened) == [dealt.own.header.rowID.hex + ".vshare", "notes.txt"])
        _ = try reopened.secret(matching: dealt.own.header.secretIDHex)
        #expect(try reopened.unlistedPieceFiles().isEmpty)
    }

    /// A piece file that no row references and no mark names is no crash's leftover: the
    /// database was lost, emptied or put back from an older backup. It is kept, named by
    /// unlistedPieceFiles, and taken back by an import; an empty database file is refused
    /// as no keystore, unchanged.
    @Test func aShareWhoseRowIsGoneIsKeptAndCanBeTakenBack() throws {
        let dealt = try deal()
        let held = try dealt.bob.importBundles([dealt.bobBundle], identity: dealt.bobID)[0]
        let file = dealt.bob.pieceFile(held.header)
        try dealt.bob.write { db in try db.execute(sql: "DELETE FROM secret") }
        let reopened = try Keystore.open(home: dealt.bob.home)
        #expect(try reopened.unlistedPieceFiles() == [file])
        #expect(FileManager.default.fileExists(atPath: file))
        // Not in place: the import would write over the only copy before its commit.
        #expect(throws: VaultError.fileSystem(path: file, reason: "is in this keystore's pieces folder, which the import writes to: copy it elsewhere first")) {
            try reopened.importBundles([file], identity: dealt.bobID)
        }
        let copy = directory.file("taken-out.vshare")
        try FileManager.default.copyItem(atPath: file, toPath: copy)
        let back = try reopened.importBundles([copy], identity: dealt.bobID)[0]
        #expect(back.header.rowID == held.header.rowID && FileManager.default.fileExists(atPath: file))
        #expect(try reopened.unlistedPieceFiles().isEmpty)
    }

    /// A removal marks its file durably, and needs no file to remove a row: a keystore that
    /// lost its pieces folder can still drop its shares.
    @Test func aShareIsRemovedWithoutItsPiecesFolder() throws {
        let dealt = try deal()
        try FileManager.default.removeItem(atPath: dealt.alice.piecesDirectory)
        try dealt.alice.removeSecret(dealt.own)
        #expect(try dealt.alice.secrets().isEmpty)
    }

    /// A mark a process cut short left is not this insert's: kept when the insert fails, for
    /// the sweep, which then removes the file whose row is gone.
    @Test func aFailedInsertLeavesAnotherProcesssMark() throws {
        let dealt = try deal()
        let header = try dealt.bob.bundleHeaders([dealt.bobBundle], identity: dealt.bobID)[0]
        let final = dealt.bob.pieceFile(header)
        try dealt.bob.ensurePiecesDirectory()
        // The mark of a removal cut short, and a directory in the file's place, so that the
        // insert's rename fails after its mark would have been made.
        #expect(FileManager.default.createFile(atPath: final + ".pending", contents: nil))
        try FileManager.default.createDirectory(atPath: final + "/in-the-way", withIntermediateDirectories: true)
        #expect(throws: (any Error).self) { try dealt.bob.importBundles([dealt.bobBundle], identity: dealt.bobID) }
        #expect(FileManager.default.fileExists(atPath: final + ".pending"), "another process's mark stays for the sweep")
        #expect(try dealt.bob.markPending(final) == false, "a mark that is there is not made again")
    }

    /// An empty keystore file (a lost database, a disk that filled) is no keystore: opening
    /// it writes nothing into it, so a failed command leaves it as it was.
    @Test func anEmptyKeystoreFileIsRefusedUnchanged() throws {
        let home = VaultHome(directory: directory.file("emptied"))
        do { _ = try Keystore.create(home: home, label: Label("e"), passphrase: nil) }
        for suffix in ["-wal", "-shm"] { unlink(home.keystorePath + suffix) }
        #expect(truncate(home.keystorePath, 0) == 0)
        #expect(throws: VaultError.emptyKeystore(path: home.keystorePath)) { try Keystore.open(home: home) }
        #expect(try FileManager.default.attributesOfItem(atPath: home.keystorePath)[.size] as? Int == 0)
    }

    @Test func aMissingOrResizedPieceFileIsACorruptKeystore() throws {
        let dealt = try deal()
        let file = dealt.alice.pieceFile(dealt.own.header)
        let bob = try dealt.alice.peer(named: "bob")
        func release() throws {
            try ReleasedPiece.release(dealt.own, to: bob, keystore: dealt.alice, identity: dealt.aliceID,
                                      output: try OutputFile(path: directory.file("released-\(UUID().uuidString)")))
        }
        let bytes = try #require(FileManager.default.contents(atPath: file))
        #expect(truncate(file, off_t(bytes.count - 1)) == 0)
        #expect { try release() } throws: { "\($0)".contains("has the wrong size") }
        unlink(file)
        #expect { try release() } throws: { "\($0)".contains("cannot be read") }
        // Back as it was, it releases again.
        #expect(FileManager.default.createFile(atPath: file, contents: bytes))
        try release()
    }

    /// A refused store leaves no file behind: not the bundle it was given, not a staged copy.
    @Test func aRefusedStoreLeavesNoFile() throws {
        let dealt = try deal(name: try Label("taken"))
        // A second secret under the same local name is refused after staging.
        let request = ShareRequest(type: .note, threshold: 2, holders: [(label: dealt.bobID.label, card: dealt.bobID.card)])
        let outputs = [try dealt.alice.newBundleFile(), try OutputFile(path: directory.file("again.vshare"))]
        let source = BytesSource(Array("again".utf8))
        _ = try SecretDealer.share(request, content: source, dealer: dealt.aliceID, outputs: outputs)
        #expect(throws: VaultError.invalidSecret("a secret named 'taken' exists already")) {
            try dealt.alice.storeOwnBundle(at: outputs[0].path, identity: dealt.aliceID, name: try Label("taken"))
        }
        #expect(try names(in: dealt.alice) == [dealt.own.header.rowID.hex + ".vshare"])

        // A bundle whose piece was altered is refused by the holder; nothing is kept.
        var altered = try #require(FileManager.default.contents(atPath: dealt.bobBundle))
        altered[altered.count - 1] ^= 1
        let path = directory.file("altered.vshare")
        #expect(FileManager.default.createFile(atPath: path, contents: altered))
        #expect { try dealt.bob.importBundles([path], identity: dealt.bobID) } throws: {
            "\($0)".contains("does not match the dealer's commitment")
        }
        let delivered = try dealt.bob.newBundleFile()
        try altered.withUnsafeBytes { try delivered.write($0) }
        #expect { try dealt.bob.storeDeliveredBundle(at: delivered.path, identity: dealt.bobID) } throws: {
            "\($0)".contains("does not match the dealer's commitment")
        }
        #expect(try names(in: dealt.bob).isEmpty)
        #expect(try dealt.bob.secrets().isEmpty)
    }
}
