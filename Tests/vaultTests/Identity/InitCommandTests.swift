import Foundation
import Testing
import VaultCore
import VaultTestSupport

@Suite struct InitCommandTests {
    func mode(_ path: String) -> mode_t {
        var info = stat()
        _ = stat(path, &info)
        return info.st_mode & 0o777
    }

    @Test func createsAPrivateKeystore() throws {
        let user = User()
        // A passphrase is the default: without a terminal to ask on, init says how to go on.
        let asked = try user.fails("init", "--label", "alice")
        #expect(asked.contains("no terminal to ask for a passphrase") && asked.contains("--no-passphrase"), "\(asked)")
        #expect(!FileManager.default.fileExists(atPath: user.vault.home + "/vault.sqlite"))
        let result = try user.vault.run("init", "--label", "alice", "--no-passphrase")
        #expect(result.status == 0)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("created identity 'alice'"))
        #expect(result.stderr.contains("vault: warning: the private keys are stored without a passphrase"))
        #expect(mode(user.vault.home) == 0o700)
        #expect(mode(user.vault.home + "/vault.sqlite") == 0o600)
        #expect(try user.ok("id", "--format", "json").contains("\"label\" : \"alice\""))

        // Refused: the error alone, no warning about keys that were never stored.
        let again = try user.vault.run("init", "--label", "alice", "--no-passphrase")
        #expect(again.status == 1 && again.stderr.hasPrefix("vault: error: an identity already exists"), "\(again.stderr)")
        let file = try user.directory.write("afile", Array("x".utf8))
        let under = try user.vault.run("init", "--home", file + "/sub", "--label", "x", "--no-passphrase")
        #expect(under.status == 1 && under.stderr == "vault: error: \(file): exists and is not a directory\n", "\(under.stderr)")
    }

    @Test func homeOptionWinsOverVAULT_HOME() throws {
        let user = User()
        let other = user.directory.file("other")
        try user.ok("init", "--home", other, "--label", "elsewhere", "--no-passphrase")
        #expect(FileManager.default.fileExists(atPath: other + "/vault.sqlite"))
        #expect(!FileManager.default.fileExists(atPath: user.vault.home + "/vault.sqlite"))
    }

    @Test func defaultsTheLabelToUserAtHost() throws {
        let user = User()
        user.vault.environment["USER"] = "tester"
        try user.ok("init", "--no-passphrase")
        #expect(try user.ok("id").contains("label        tester@"))
    }

    @Test func refusesASecondInitWithoutForce() throws {
        let user = try User().initialize("alice")
        let card = try user.card()
        let message = try user.fails("init", "--label", "eve", "--no-passphrase")
        #expect(message.contains("an identity already exists"))
        #expect(message.contains("vault: hint: pass --force"))
        #expect(try user.card() == card)
        try user.ok("init", "--label", "alice2", "--force", "--no-passphrase")
        #expect(try user.card() != card)
    }

    @Test func refusesBadLabelsAndOptions() throws {
        let user = User()
        #expect(try user.fails("init", "--label", "a,b", "--no-passphrase").contains("invalid label 'a,b'"))
        #expect(!FileManager.default.fileExists(atPath: user.vault.home + "/vault.sqlite"))
        try user.fails("init", "--passphrase", "--passphrase-file", "x", status: 64)
        try user.fails("init", "--no-passphrase", "--scrypt-n", "65536", status: 64)
        try user.fails("init", "--no-passphrase", "--passphrase-file", "x", status: 64)
    }

    @Test func usageErrorsExitWith64() throws {
        let result = try User().vault.run("frobnicate")
        #expect(result.status == 64)
    }

    @Test func commandsWithoutAKeystoreSayHowToStart() throws {
        let message = try User().fails("id")
        #expect(message.contains("no keystore at"))
        #expect(message.contains("vault: hint: run 'vault init'"))
    }
}

@Suite struct PassphraseCommandTests {
    @Test func protectedKeysNeedThePassphrase() throws {
        let user = User()
        let passFile = try user.directory.write("pass", Array("correct horse\n".utf8))
        let wrongFile = try user.directory.write("wrong", Array("wrong horse\n".utf8))
        let newFile = try user.directory.write("new", Array("new horse\n".utf8))
        try user.ok("init", "--label", "alice", "--passphrase-file", passFile)
        // Public commands need no passphrase.
        #expect(try user.card().hasPrefix("vault1"))
        // Opening the keys without the passphrase, and no terminal to ask on, fails.
        let missing = try user.fails("passphrase", "--new-passphrase-file", newFile)
        #expect(missing.contains("protected by a passphrase and none was given"))
        #expect(missing.contains("--passphrase-file"))
        let wrong = try user.fails("passphrase", "--passphrase-file", wrongFile, "--new-passphrase-file", newFile)
        #expect(wrong.contains("vault: error: wrong passphrase\nvault: hint: it is the passphrase of this keystore's identity"), "\(wrong)")
        try user.ok("passphrase", "--passphrase-file", passFile, "--new-passphrase-file", newFile, "--scrypt-n", "65536")
        try user.fails("passphrase", "--passphrase-file", passFile, "--remove")
        try user.ok("passphrase", "--passphrase-file", newFile, "--remove")
        // Unprotected now: no passphrase needed.
        try user.ok("passphrase", "--new-passphrase-file", passFile)
    }

    @Test func refusesEmptyAndOutOfRangeParameters() throws {
        let user = User()
        let empty = try user.directory.write("empty", Array("\n".utf8))
        let pass = try user.directory.write("pass", Array("pw".utf8))
        #expect(try user.fails("init", "--label", "a", "--passphrase-file", empty).contains("the passphrase is empty"))
        #expect(try user.fails("init", "--label", "a", "--passphrase-file", pass, "--scrypt-n", "16384")
            .contains("scrypt parameters out of range"))
        #expect(try user.fails("init", "--label", "a", "--passphrase").contains("no terminal to ask for a passphrase"))
        #expect(!FileManager.default.fileExists(atPath: user.vault.home + "/vault.sqlite"))
    }

    @Test func asksOnTheTerminalWithoutEcho() throws {
        let user = User()
        let session = try user.vault.interactive("init", "--label", "alice", "--passphrase")
        try session.expect("New passphrase: ")
        session.send("s3cret words")
        try session.expect("Repeat it: ")
        session.send("s3cret words")
        #expect(session.finish().status == 0)
        #expect(!session.transcript.contains("s3cret"))

        let change = try user.vault.interactive("passphrase", "--remove")
        try change.expect("Passphrase for alice: ")
        change.send("s3cret words")
        #expect(change.finish().status == 0)
        #expect(!change.transcript.contains("s3cret"))
    }

    /// Issue 32: a new passphrase shorter than 8 characters is used only once confirmed; a
    /// repeat that differs asks again, 3 times in all; a wrong passphrase typed on the
    /// terminal gets 3 tries, as sudo gives (one from a file); nothing is stored before.
    @Test func shortMismatchedAndWrongPassphrasesAreAskedAgain() throws {
        let user = User()
        let session = try user.vault.interactive("init", "--label", "alice")
        try session.expect("New passphrase: ")
        session.send("abc")
        try session.expect("This has only 3 characters, fewer than the 8 advised: whoever copies the keystore could guess it, and act as you.")
        try session.expect("Use it anyway? [y/N] ")
        session.send("n")
        try session.expect("New passphrase: ", times: 2)
        session.send("correct horse")
        try session.expect("Repeat it: ")
        session.send("correct hors")
        try session.expect("They do not match; try again.")
        try session.expect("New passphrase: ", times: 3)
        session.send("correct horse")
        try session.expect("Repeat it: ", times: 2)
        session.send("correct horse")
        #expect(session.finish().status == 0)

        let change = try user.vault.interactive("passphrase", "--remove")
        for attempt in 1...2 {
            try change.expect("Passphrase for alice: ", times: attempt)
            change.send("wrong \(attempt)")
            try change.expect("Wrong passphrase; try again.", times: attempt)
        }
        try change.expect("Passphrase for alice: ", times: 3)
        change.send("correct horse")
        let removed = change.finish()
        #expect(removed.status == 0 && removed.stderr.contains("no longer passphrase-protected"), "\(removed.stderr)")

        // From a file: a short one is warned about, and a wrong one tried once.
        let short = try user.directory.write("short", Array("pw\n".utf8))
        let set = try user.vault.run("passphrase", "--new-passphrase-file", short)
        #expect(set.status == 0 && set.stderr.contains("vault: warning: the passphrase in \(short): this has only 2 characters, fewer than the 8 advised; whoever copies"), "\(set.stderr)")
        #expect(try user.fails("passphrase", "--passphrase-file", try user.directory.write("wrong", Array("nope\n".utf8)), "--remove")
            .contains("wrong passphrase"))

        let three = try user.vault.interactive("passphrase", "--remove")
        for attempt in 1...3 {
            try three.expect("Passphrase for alice: ", times: attempt)
            three.send("wrong \(attempt)")
        }
        let refused = three.finish()
        #expect(refused.status == 1 && refused.stderr.contains("vault: error: wrong passphrase"), "\(refused.stderr)")
        #expect(three.transcript.components(separatedBy: "Wrong passphrase; try again.").count == 3)
    }

    @Test func threeMismatchedRepeatsStoreNothing() throws {
        let user = User()
        let session = try user.vault.interactive("init", "--label", "alice", "--passphrase")
        for attempt in 1...3 {
            try session.expect("New passphrase: ", times: attempt)
            session.send("one long passphrase")
            try session.expect("Repeat it: ", times: attempt)
            session.send("two long passphrases")
        }
        let result = session.finish()
        #expect(result.status == 1)
        #expect(result.stderr.contains("the passphrases do not match"))
        #expect(!FileManager.default.fileExists(atPath: user.vault.home + "/vault.sqlite"))
    }
}
