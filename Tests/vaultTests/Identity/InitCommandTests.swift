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
        #expect(try user.fails("passphrase", "--passphrase-file", wrongFile, "--new-passphrase-file", newFile)
            .contains("wrong passphrase"))
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

    @Test func mismatchedRepeatStoresNothing() throws {
        let user = User()
        let session = try user.vault.interactive("init", "--label", "alice", "--passphrase")
        try session.expect("New passphrase: ")
        session.send("one")
        try session.expect("Repeat it: ")
        session.send("two")
        let result = session.finish()
        #expect(result.status == 1)
        #expect(result.stderr.contains("the passphrases do not match"))
        #expect(!FileManager.default.fileExists(atPath: user.vault.home + "/vault.sqlite"))
    }
}
