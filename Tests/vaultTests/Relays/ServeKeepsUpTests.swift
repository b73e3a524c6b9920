import Foundation
import GRDB
import Testing
@testable import VaultCore
import VaultTestSupport

/// Friends in other cities (issue 47): holders that run only `vault serve`, as the docs and
/// the systemd unit suggest, each in a network namespace of its own with the relays as the
/// only way between them.
@Suite(.serialized) struct ServeKeepsUpTests {
    /// The blocker: a serve took no new group, nor a group's new version, and called a
    /// message from a member added since "malformed" and dropped it. Now bob's and carol's
    /// serves take the group alice makes after they started, ask about her share, and take
    /// dave's request once they hear of the record that names him.
    @Test func serveTakesNewGroupsAndMessagesFromNewMembers() throws {
        let w = try HoldersWorld(["alice", "bob", "carol"], group: false, inCities: true)
        try w.serve("bob")
        try w.serve("carol")
        try w["alice"].ok(["group", "create", "friends", "--relays", "r1,r2,r3", "--members", "bob,carol"])
        for holder in ["bob", "carol"] { try w.serves[holder]!.waitFor("accepted group 'friends'", timeout: 60) }
        let shared = try w["alice"].vault.run(["share", "-", "--to", "bob,carol", "-k", "2", "--description", "boat"], stdin: Array("six".utf8))
        #expect(shared.status == 0, "\(shared.stderr)")
        #expect(shared.stderr.contains("bob: sent through the relays of friends"), "\(shared.stderr)")
        let id = shared.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        for holder in ["bob", "carol"] {
            let offer = try w.serves[holder]!.waitFor("share offer ([0-9a-f]{8}): 'alice' offers you share")
            try w[holder].ok("approve", offer)
        }

        // Dave joins; his request reaches serves whose record of friends does not name him.
        try w.add("dave")
        try w["alice"].ok("group", "add", "friends", "dave")
        try w["dave"].ok("receive")
        let dealer = String(try w["alice"].card().split(separator: "#")[0])
        #expect(try w["dave"].vault.run(["recover", id, "--dealer", dealer, "--from", "bob,carol"]).status == 75)
        for holder in ["bob", "carol"] {
            let serve = w.serves[holder]!
            try serve.waitFor("release request [0-9a-f]{8}: 'dave' asks for piece [23] of alice's note", timeout: 60)
            #expect(!serve.log.contains("malformed"), "\(serve.log)")
        }
    }

    /// The dealer sees an emergency request without running `vault receive`: `vault
    /// requests`, with no serve, reads the relays first and says so.
    @Test func requestsReadTheRelaysWhenNoServeDoes() throws {
        let w = try HoldersWorld(["alice", "bob", "carol", "dave"])
        let id = try w.shareWithEmergency("passport 123", wait: "1h")
        try w.serve("bob")
        try w.serve("carol")
        let asked = Date()
        #expect(try w.daveRecovers(id, ["--ttl", "2h"]).status == 75)
        for holder in ["bob", "carol"] { try w.serves[holder]!.waitFor("emergency request [0-9a-f]{8}: dave asks") }
        let listed = try w["alice"].vault.run("requests")
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains("dave asks for emergency access to 'passport'"), "\(listed.stdout) \(listed.stderr)")
        #expect(listed.stderr.contains("the relays were read just now"), "\(listed.stderr)")
        // The request is dated when dave asked (the first holder's receipt), not when alice
        // first heard of it.
        let shown = try w["alice"].ok("secrets", "show", id)
        let stamp = try #require(shown.firstMatch(of: /request [0-9a-f]{8} from 'dave' \(asked ([0-9-]+ [0-9:]+)\)/)?.1, "\(shown)")
        let format = DateFormatter()
        format.dateFormat = "yyyy-MM-dd HH:mm:ss"
        let when = try #require(format.date(from: String(stamp)))
        #expect(abs(when.timeIntervalSince(asked)) < 10, "\(stamp) for a request made at \(asked)")
        // Without a way to open the keys, it says when they were last read instead.
        let words = try w["alice"].directory.write("words", Array("a long and careful passphrase\n".utf8))
        try w["alice"].ok("passphrase", "--new-passphrase-file", words)
        let locked = try w["alice"].vault.run("requests")
        #expect(locked.stderr.contains("the relays were last read ") && locked.stderr.contains("not read now: your keys need your passphrase"),
                "\(locked.stderr)")
    }

    /// A finished recovery withdraws its other requests: carol's question goes from her
    /// serve, and nothing waits for her any more.
    @Test func aFinishedRecoveryWithdrawsItsOtherRequests() throws {
        let w = try HoldersWorld(["alice", "bob", "carol", "dave"])
        let id = try w.share("the boat leaves at six", with: ["bob", "carol", "dave"])
        try w.serve("carol")
        // Without --wait first: the hint's command to run again keeps -o (it once dropped it,
        // and a file then met "standard output is a terminal").
        let out = w.directory.file("boat.txt")
        let early = try w["alice"].vault.run(["recover", id, "-o", out])
        #expect(early.status == 75, "\(early.stderr)")
        #expect(early.stderr.contains("vault: hint: run 'vault recover \(id.prefix(16)) -o \(out)' again once they answer"), "\(early.stderr)")
        // Holders a group reaches are not told to be given --peer: the relays ask them.
        #expect(early.stderr.contains("  bob: not found nearby (asked through relays if the LAN does not give enough)"), "\(early.stderr)")
        #expect(!early.stderr.contains("use --peer"), "\(early.stderr)")
        let recovery = try w["alice"].vault.background(["recover", id, "--wait", "--timeout", "60", "-o", out], log: w.directory.file("recover.log"))
        let asked = try w.serves["carol"]!.waitFor("release request ([0-9a-f]{8}): 'alice' asks for piece 3")
        try w["bob"].ok("approve", try w.request(at: "bob", from: "alice"))
        #expect(recovery.wait() == 0, "\(recovery.log)")
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "the boat leaves at six")
        try w.serves["carol"]!.waitFor("'alice' withdrew request \(asked): its recovery is over")
        #expect(!(try w["carol"].ok("requests")).contains(asked))
        let received = try w["dave"].vault.run("receive")
        #expect(received.stderr.contains("'alice' withdrew request"), "\(received.stderr)")
        #expect(try w["dave"].ok("requests").isEmpty)
    }

    /// With a serve beside it, `vault unlock --wait` heard of an approval only when its
    /// relays' wait ran out (25 s): the serve had taken the answer off the relays. It now
    /// also looks at the keystore, where the serve put it.
    @Test func anUnlockBesideAServeSeesTheApprovalAtOnce() throws {
        let w = try HoldersWorld(["alice", "bob", "carol"])
        try w["alice"].ok("key", "create", "family", "--to", "bob,carol", "-k", "2")
        for holder in ["bob", "carol"] { try w[holder].ok("approve", try w.request(at: holder, from: "alice")) }
        try w.serve("alice")
        let unlock = try w["alice"].vault.background(["unlock", "family", "--wait", "--timeout", "90"], log: w.directory.file("unlock.log"))
        let request = try w.request(at: "bob", from: "alice")
        let approved = Date()
        try w["bob"].ok("approve", request)
        #expect(unlock.wait() == 0, "\(unlock.log)")
        // Well under the 25 s of a relay's wait, with room for a loaded machine.
        #expect(Date().timeIntervalSince(approved) < 15, "\(unlock.log)")
    }

    /// `vault unlock` beside a serve asked for the passphrase the serve was started with
    /// (issue 47, minor 9): the serve's identity now recovers the key, streaming the
    /// recovery's lines back, and the terminal is asked nothing. A holder that denies ends it
    /// with the command's own error and exit status, said through the serve.
    @Test func anUnlockBesideAServeAsksNoPassphrase() throws {
        let w = try HoldersWorld(["alice", "bob", "carol"])
        let words = try w["alice"].directory.write("words", Array("a long and careful passphrase\n".utf8))
        try w["alice"].ok("passphrase", "--new-passphrase-file", words)
        try w["alice"].ok("key", "create", "family", "--to", "bob,carol", "-k", "2", "--passphrase-file", words)
        for holder in ["bob", "carol"] { try w[holder].ok("approve", try w.request(at: holder, from: "alice")) }
        try w.serve("alice", ["--passphrase-file", words])
        let session = try w["alice"].vault.onTerminal(["unlock", "family", "--wait", "--timeout", "90"])
        try session.expect("bob: asked through the relays of friends", timeout: 60)
        try w["bob"].ok("approve", try w.request(at: "bob", from: "alice"))
        try session.expect("unlocked key 'family' until ", timeout: 60)
        let done = session.finish()
        #expect(done.status == 0, "\(session.transcript)")
        #expect(!session.transcript.contains("Passphrase"), "\(session.transcript)")
        #expect(session.transcript.contains("recovering key 'family' from its holders"), "\(session.transcript)")
        #expect(try w["alice"].ok("keys", "list").contains("unlocked until"))

        // Locked again, and asked anew: the holders answer only after the agent's 30 s idle
        // timeout (the recovery keeps its connection), and both deny; the command exits 1
        // with the recovery's own words, and the key stays locked.
        try w["alice"].ok("lock", "family")
        let again = try w["alice"].vault.background(["unlock", "family", "--wait", "--timeout", "90", "--restart"],
                                                    log: w.directory.file("unlock-denied.log"))
        let requests = try ["bob", "carol"].map { try w.request(at: $0, from: "alice") }
        Thread.sleep(forTimeInterval: 32)
        for (holder, request) in zip(["bob", "carol"], requests) { try w[holder].ok("deny", request) }
        #expect(again.wait() == 1, "\(again.log)")
        #expect(again.log.contains("vault: error: only 1 verified piece, 2 needed; missing: bob, carol"), "\(again.log)")
        #expect(again.log.contains("'vault unlock family --restart' asks every holder anew"), "\(again.log)")
        #expect(!again.log.contains("Passphrase"), "\(again.log)")
        #expect(try w["alice"].ok("keys", "list").contains("locked"))

        // A command that goes away stops its recovery in the serve, which keeps nothing of it
        // and takes the next unlock.
        let gone = try w["alice"].vault.background(["unlock", "family", "--wait", "--restart"], log: w.directory.file("unlock-gone.log"))
        try gone.waitFor("bob: asked through the relays of friends", timeout: 60)
        _ = gone.stop(SIGKILL)
        try w.serves["alice"]!.waitFor("agent: the recovery of key [0-9a-f]{16} stopped: its 'vault unlock' went away", timeout: 30)
        let next = try w["alice"].vault.run(["unlock", "family", "--restart"])
        #expect(next.status == 75 && !next.stderr.contains("another 'vault unlock' is recovering"), "\(next.stderr)")
    }

    /// A dealer's share that never went out (a share stopped part way, whose delivery left
    /// no row) is shown as not yet reached, with the command that sends it.
    @Test func aShareNotYetReachedSaysHowToSendIt() throws {
        let w = try HoldersWorld(["alice", "bob", "carol"])
        let id = try w.share("the boat leaves at six", with: ["bob", "carol"])
        let keystore = try DatabaseQueue.beside(w["alice"].vault.home + "/vault.sqlite")
        try keystore.write { db in try db.execute(sql: "DELETE FROM share_delivery WHERE holder_label = 'carol'") }
        let shown = try w["alice"].ok("secrets", "show", id)
        #expect(shown.contains("carol (index 3)  not yet reached"), "\(shown)")
        #expect(shown.contains("('vault secrets push \(id.prefix(16)) --to carol' delivers the shares not yet reached)"), "\(shown)")
    }

    /// `vault key create --group` asked for the passphrase twice (the share, then the tie to
    /// the group): once now.
    @Test func aKeyCreatedForAGroupAsksThePassphraseOnce() throws {
        let w = try HoldersWorld(["alice", "bob", "carol"])
        let words = try w["alice"].directory.write("words", Array("a long and careful passphrase\n".utf8))
        try w["alice"].ok("passphrase", "--new-passphrase-file", words)
        let session = try w["alice"].vault.interactive("key", "create", "family", "--to", "bob,carol", "-k", "2", "--group", "friends")
        try session.expect("Passphrase for alice: ")
        session.send("a long and careful passphrase")
        let done = session.finish()
        #expect(done.status == 0, "\(done.stderr)")
        #expect(session.transcript.components(separatedBy: "Passphrase for alice: ").count == 2, "\(session.transcript)")
        #expect(try w["alice"].ok("keys", "list").contains("family"))
    }

    /// `--dealer` for a secret held here said "a secret you hold no share of is named by its
    /// whole id"; it says what is wrong now. A relay in plain HTTP beyond loopback warns, and
    /// says when it stops.
    @Test func wordsForTwoMistakes() throws {
        let w = try HoldersWorld(["alice", "bob", "carol"])
        let id = try w.share("the boat leaves at six", with: ["bob", "carol"])
        try w["bob"].ok("secrets", "rename", id, "boat")
        let held = try w["bob"].fails("recover", "boat", "--dealer", "alice", "--from", "carol")
        #expect(held.contains("vault: error: you hold a share of boat (\(id.prefix(16))): --dealer and --from are for a secret you hold no share of"),
                "\(held)")
        #expect(held.contains("vault: hint: 'vault recover boat' asks its holders with your share"), "\(held)")

        let (inside, other) = try NetworkNamespace.linked()
        defer { withExtendedLifetime(other) {} }
        let (tool, arguments) = inside.wrap(VaultBinary.path, ["relay", "serve", "--listen", "10.231.0.1:0", "--store", "sqlite:" + w.directory.file("wide.db")])
        let relay = try BackgroundProcess(tool, arguments, environment: [:], logPath: w.directory.file("wide.log"))
        try relay.waitFor("listening on ")
        try relay.waitFor("vault: warning: serving plain HTTP on 10.231.0.1, beyond this machine")
        #expect(relay.log.contains("vault: hint: give --tls-cert and --tls-key"), "\(relay.log)")
        #expect(relay.stop(SIGTERM) == 0)
        #expect(relay.log.contains("vault relay: stopped"), "\(relay.log)")
    }
}
