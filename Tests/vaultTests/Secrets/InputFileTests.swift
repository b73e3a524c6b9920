import Foundation
import Testing
import VaultTestSupport

/// Issue 32: input files are read before anything is asked, an error about one names it,
/// and --out-dir is created when it is missing.
@Suite struct InputFileTests {
    /// With bob's keys behind a passphrase and no terminal, the old order failed for want of
    /// the passphrase; now the missing file is named first.
    @Test func inputFilesAreCheckedBeforeThePassphraseIsAskedFor() throws {
        let circle = try Circle(["alice", "bob"])
        let note = try circle.files.write("note", Array("hi\n".utf8))
        let id = try circle.share(from: "alice", ["--type", "note", note, "--to", "bob", "-k", "2"])
        let piece = try circle.release(id, from: "alice", to: "bob")
        let bob = circle["bob"]
        try bob.ok("passphrase", "--new-passphrase-file", try circle.files.write("pass", Array("a long passphrase\n".utf8)))
        let nope = circle.files.file("nope")
        for arguments in [["secrets", "import", nope + ".vshare"], ["share", nope + ".txt", "--to", "alice", "-k", "2"],
                          ["recover", id, "--piece", nope + ".vpiece"], ["recover", id, "--piece", piece, "--password-file", nope],
                          ["passphrase", "--new-passphrase-file", nope]] {
            let message = try bob.fails(arguments)
            #expect(message.contains("vault: error: \(nope)") && message.contains("No such file or directory"), "\(arguments): \(message)")
        }
        // On a terminal: refused without a prompt.
        let session = try bob.vault.atPrompt(["secrets", "import", nope + ".vshare"])
        #expect(session.finish(within: 10).status == 1)
        session.readRest()
        #expect(session.transcript.isEmpty, "\(session.transcript)")
    }

    @Test func errorsAboutAnInputFileNameIt() throws {
        let circle = try Circle(["alice", "bob"])
        let note = try circle.files.write("note", Array("hi\n".utf8))
        _ = try circle.share(from: "alice", ["--type", "note", note, "--to", "bob", "-k", "2"], import: false)
        let bundle = try Array(Data(contentsOf: URL(fileURLWithPath: circle.lastOut + "/bob.vshare")))
        let truncated = try circle.files.write("truncated.vshare", bundle.prefix(100))
        let garbage = try circle.files.write("garbage.vshare", Array("garbage\n".utf8))
        let junk = try circle.files.write("junk.item", Array("junk\n".utf8))
        let empty = try circle.files.write("empty", Array("\n".utf8))
        let bob = circle["bob"]
        let cases: [([String], String)] = [
            (["secrets", "import", "--yes", truncated], "\(truncated): the share bundle is truncated"),
            (["secrets", "import", "--yes", garbage], "\(garbage): the share bundle is malformed"),
            (["item", "import", junk], "\(junk): "),
            (["passphrase", "--new-passphrase-file", empty], "\(empty): the passphrase is empty"),
            // A password or PIN file is called what it holds.
            (["share", "--type", "note", note, "--to", "alice", "-k", "2", "--password-file", empty], "\(empty): the password is empty"),
            (["passphrase", "--tpm", "--new-pin-file", empty], "\(empty): the PIN is empty"),
            (["share", "--type", "password", "-", "--to", "alice", "-k", "2"], "standard input: the password is empty"),
            (["share", "--type", "password", "--to", "alice", "-k", "2"], "no password to store was given, and there is no terminal to ask for it on"),
            (["peer", "add", "--image", junk, "--yes"], "cannot read image \(junk)"),
        ]
        for (arguments, expected) in cases {
            let message = try bob.fails(arguments)
            #expect(message.contains("vault: error: \(expected)"), "\(arguments): \(message)")
        }
        let armored = try bob.fails(["item", "import", "-"], stdin: "-----BEGIN VAULT ITEM-----\nAAAA\n")
        #expect(armored.contains("vault: error: standard input: "), "\(armored)")
        let scanned = try bob.fails(["scan", "-"], stdin: "VAULTITEM1NOTANITEM")
        #expect(scanned.contains("vault: error: standard input: "), "\(scanned)")
        #expect(try bob.fails("scan", "--image", junk).contains("vault: error: cannot read image \(junk)"))
        let id = try circle.share(from: "alice", ["--type", "note", note, "--to", "bob", "-k", "2"])
        #expect(try bob.fails("recover", id, "--piece", garbage).contains("vault: error: \(garbage) is malformed"))
    }

    /// A missing --out-dir is created at 0700, with its parents; a command that fails then
    /// leaves no directory behind.
    @Test func aMissingOutDirIsCreated() throws {
        let circle = try Circle(["alice", "bob"])
        let note = try circle.files.write("note", Array("hi\n".utf8))
        let out = circle.files.file("new/deeper")
        let result = try circle["alice"].vault.run(["share", "--type", "note", note, "--to", "bob", "-k", "2", "--out-dir", out])
        #expect(result.status == 0 && result.stderr.contains("created directory \(circle.files.file("new")) (mode 0700)"), "\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: out + "/bob.vshare"))
        for directory in [out, circle.files.file("new")] {
            let mode = try FileManager.default.attributesOfItem(atPath: directory)[.posixPermissions] as? Int
            #expect(mode == 0o700)
        }
        try circle["alice"].ok("key", "create", "family", "--to", "bob", "-k", "2", "--out-dir", circle.files.file("keys"))
        #expect(FileManager.default.fileExists(atPath: circle.files.file("keys/bob.vshare")))

        let fresh = circle.files.file("fresh")
        let long = String(repeating: "x", count: 2000)
        let refused = try circle["alice"].fails("share", "--type", "note", note, "--to", "bob", "-k", "2", "--out-dir", fresh, "--description", long)
        #expect(refused.contains("description") && !refused.contains("created directory"), "\(refused)")
        #expect(!FileManager.default.fileExists(atPath: fresh))
    }
}
