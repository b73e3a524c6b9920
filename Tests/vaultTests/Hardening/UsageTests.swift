import Foundation
import Testing
import VaultTestSupport

/// Issue 32: a mistyped command or option gets a "did you mean", from the commands' own
/// tree; a missing argument is a usage error (64); and hints name what the program knows
/// instead of leaving placeholders.
@Suite struct UsageTests {
    let user: User

    init() throws { user = try User().initialize("alice") }

    @Test func mistypedCommandsAndOptionsGetTheNearestOnes() throws {
        let command = try user.fails("shar", status: 64)
        #expect(command.contains("vault: error: 'vault' has no command 'shar'")
            && command.contains("vault: hint: did you mean 'vault share'? 'vault help' lists the commands"), "\(command)")
        let option = try user.fails("share", "--too", "bob", "-k", "2", status: 64)
        #expect(option.contains("vault: error: 'vault share' has no option '--too'")
            && option.contains("vault: hint: did you mean '--to'? 'vault help share' shows how to use it"), "\(option)")
        let nested = try user.fails("secrets", "improt", "bob.vshare", status: 64)
        #expect(nested.contains("'vault secrets' has no command 'improt'") && nested.contains("did you mean 'vault secrets import'?"), "\(nested)")
        let two = try user.fails("rec", status: 64)
        #expect(two.contains("did you mean 'vault recover' or 'vault recover-words' or 'vault receive'?"), "\(two)")
        let none = try user.fails("frobnicate", status: 64)
        #expect(none.contains("'vault' has no command 'frobnicate'") && none.contains("vault: hint: 'vault help' lists the commands"), "\(none)")
        // Not a mistake of names: ArgumentParser's words, with the command's own help.
        let missing = try user.fails("recover", status: 64)
        #expect(missing.contains("missing expected argument '<id>'") && missing.contains("vault: hint: 'vault help recover' shows how to use it"),
                "\(missing)")
        #expect(!missing.contains("COMMAND"))
        // `-` is standard output elsewhere; a released piece is a file, so it is refused,
        // where it was once written to a file named -.
        #expect(try user.fails("secrets", "release", "abcd", "--for", "bob", "-o", "-", status: 64)
                    .contains("vault: error: -o takes a file to write the piece to, not -"))
        #expect(!FileManager.default.fileExists(atPath: "-"))
    }

    /// A group to join again is looked up before the passphrase is asked: an id that names
    /// no group left says so, where it once asked for (here, with no terminal, failed for
    /// want of) the passphrase first.
    @Test func aGroupToJoinIsLookedUpBeforeThePassphrase() throws {
        let passphrase = user.directory.file("passphrase")
        try Data("a long passphrase\n".utf8).write(to: URL(fileURLWithPath: passphrase))
        try user.ok("passphrase", "--new-passphrase-file", passphrase)
        let unknown = try user.fails("group", "join", "3f2a9c1e")
        #expect(unknown.hasPrefix("vault: error: no group matches '3f2a9c1e'"), "\(unknown)")
    }

    /// A recovery onto a new machine names a mistyped dealer's label, or group, as such: a
    /// label is no damaged key card, and a group that does not exist is said before anyone
    /// is asked (it once asked nobody, and exited 75 as if answers were to come).
    @Test func aRecoverysDealerAndGroupAreLookedUpFirst() throws {
        let id = String(repeating: "ab", count: 16)
        let dealer = try user.fails("recover", id, "--dealer", "alicee", "--from", "bob")
        #expect(dealer.hasPrefix("vault: error: no peer named 'alicee'\n"), "\(dealer)")
        let group = try user.fails("recover", id, "--dealer", "alicee", "--from", "bob", "--group", "frends")
        #expect(group.hasPrefix("vault: error: no group matches 'frends'\n"), "\(group)")
        // Holders that no group shares: nobody can be asked, which is an error, not a wait
        // (it exited 75, "waiting for nobody").
        let circle = try Circle(["alice", "bob"])
        let nobody = try circle["bob"].vault.run(["recover", id, "--dealer", "alice", "--from", "alice"])
        #expect(nobody.status == 1, "\(nobody.stderr)")
        #expect(nobody.stderr.contains("  alice: not asked through relays: ")
                && nobody.stderr.contains("vault: error: no holder could be asked through relays\n"), "\(nobody.stderr)")
    }

    /// Too few pieces: the missing holders by the labels this keystore knows them by, and
    /// the release command filled in with the secret and this identity.
    @Test func tooFewPiecesNamesTheHoldersAndTheCommandToRun() throws {
        let circle = try Circle(["alice", "bob", "carol"])
        let note = try circle.files.write("note", Array("three needed\n".utf8))
        let id = try circle.share(from: "alice", ["--type", "note", note, "--to", "bob,carol", "-k", "3"])
        let piece = try circle.release(id, from: "alice", to: "bob")
        let message = try circle["bob"].fails("recover", id, "--piece", piece)
        #expect(message.contains("only 2 verified pieces, 3 needed; missing: carol (index 3)"), "\(message)")
        #expect(message.contains("vault: hint: ask another holder to run 'vault secrets release \(id.prefix(16)) --for bob -o \(id.prefix(8))-for-bob.vpiece' and pass that file with --piece"), "\(message)")
    }
}
