import Foundation
import GRDB
import Testing
@testable import VaultCore
import VaultTestSupport

/// Issue 14, finding 8: shares are kept by (dealer, secret id). A co-holder who learned a
/// secret id, and deals a bundle of its own under it first, no longer keeps the real one out.
@Suite struct SecretKeyingTests {
    @Test func aSecretIDTakenFirstByAnotherDealerDoesNotKeepTheRealBundleOut() throws {
        let temporary = TemporaryDirectory("vault-keying")
        let labels = ["alice", "bob", "eve"]
        let keystores = try labels.map { try Keystore.create(home: VaultHome(directory: temporary.file($0)), label: Label($0), passphrase: nil) }
        let identities = try keystores.map { try $0.unlock(passphrase: nil) }
        for (i, keystore) in keystores.enumerated() {
            for (j, identity) in identities.enumerated() where i != j {
                try keystore.addPeer(identity.card, label: identity.label, address: nil)
            }
        }
        // The same random source gives both dealers the same secret id.
        func deal(from dealer: Int, _ text: String) throws -> (BundleHeader, String) {
            let request = ShareRequest(type: .note, threshold: 2, holders: [(label: identities[1].label, card: identities[1].card)])
            let outputs = try (0..<2).map { try OutputFile(path: temporary.file("\(labels[dealer])-\($0).vshare")) }
            let source = BytesSource(Array(text.utf8))
            let headers = try SecretDealer.share(request, content: source, dealer: identities[dealer], outputs: outputs,
                                                 random: SeededRandom(seed: "one id for two dealers"))
            _ = try keystores[dealer].storeOwnBundle(at: outputs[0].path, identity: identities[dealer], name: nil)
            try outputs[1].commit()
            return (headers[1], outputs[1].path)
        }
        let (forged, forgedPath) = try deal(from: 2, "eve's decoy")
        let (real, realPath) = try deal(from: 0, "alice's secret")
        #expect(forged.secretID == real.secretID && forged.dealer != real.dealer)
        try keystores[1].importBundles([forgedPath], identity: identities[1])
        // Before: "the keystore already holds a share of secret …".
        try keystores[1].importBundles([realPath], identity: identities[1])
        let held = try keystores[1].secrets().filter { $0.header.secretID == real.secretID }
        #expect(Set(held.map(\.header.dealer.fingerprint)) == [identities[0].card.fingerprint, identities[2].card.fingerprint])
        // The same bundle twice is still one share.
        #expect(throws: VaultError.inFile(path: realPath, .duplicateSecret(id: real.secretIDHex))) {
            try keystores[1].importBundles([realPath], identity: identities[1])
        }
        // Each opens as its own dealer's, and removing one leaves the other.
        try keystores[1].removeSecret(try #require(held.first { $0.header.dealer == identities[2].card }))
        #expect(try keystores[1].secrets().filter { $0.header.secretID == real.secretID }.map(\.header.dealer) == [identities[0].card])
    }

    /// A keystore from before: shares keyed by secret id alone are rekeyed on open, pieces
    /// with them, and still open.
    @Test func migrationRekeysSharesAndTheirPieces() throws {
        let temporary = TemporaryDirectory("vault-rekey")
        let home = VaultHome(directory: temporary.file("alice"))
        let keystore = try Keystore.create(home: home, label: Label("alice"), passphrase: nil)
        let identity = try keystore.unlock(passphrase: nil)
        let bob = try Keystore.create(home: VaultHome(directory: temporary.file("bob")), label: Label("bob"), passphrase: nil)
        let bobIdentity = try bob.unlock(passphrase: nil)
        try keystore.addPeer(bobIdentity.card, label: bobIdentity.label, address: nil)
        let request = ShareRequest(type: .note, threshold: 2, holders: [(label: bobIdentity.label, card: bobIdentity.card)])
        let outputs = try (0..<2).map { try OutputFile(path: temporary.file("b\($0).vshare")) }
        let source = BytesSource(Array("the old way".utf8))
        let header = try SecretDealer.share(request, content: source, dealer: identity, outputs: outputs)[0]
        _ = try keystore.storeOwnBundle(at: outputs[0].path, identity: identity, name: nil)
        // Back to the old keying and the old piece rows, as a keystore written before v7.
        let pieceFile = keystore.pieceFile(header)
        let bundle = try #require(FileManager.default.contents(atPath: pieceFile))
        let pieceStart = bundle.count - Int(Dispersal.pieceLength(dataLength: header.ciphertextLength, k: header.threshold))
        try keystore.database.write { db in
            try db.execute(sql: """
                CREATE TABLE secret_piece (
                    secret_id BLOB NOT NULL REFERENCES secret(id) ON DELETE CASCADE,
                    seq INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (secret_id, seq)) WITHOUT ROWID
                """)
            try db.execute(sql: "UPDATE secret SET id = ?", arguments: [Data(header.secretID)])
            try db.execute(sql: "INSERT INTO secret_piece VALUES (?, 0, ?)", arguments: [Data(header.secretID), bundle[pieceStart...]])
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier IN ('v7-secrets-by-dealer-and-id', 'v8-pieces-in-files')")
        }
        unlink(pieceFile)
        let reopened = try Keystore.open(home: home)
        let stored = try #require(try reopened.secrets().first)
        // Rekeyed (v7), and the piece moved out to its file (v8), byte for byte.
        let (id, pieceTable) = try reopened.database.read { db in
            (try Data.fetchOne(db, sql: "SELECT id FROM secret"), try db.tableExists("secret_piece"))
        }
        #expect(FileManager.default.contents(atPath: pieceFile) == bundle)
        #expect(id == Data(header.rowID) && !pieceTable)
        // The piece still opens: releasing it reads it back and checks its commitment.
        let released = try OutputFile(path: temporary.file("released.vpiece"))
        try ReleasedPiece.release(stored, to: try reopened.peer(named: "bob"), keystore: reopened, identity: identity, output: released)
    }
}
