import Foundation
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
        #expect(try w.daveRecovers(id, ["--ttl", "2h"]).status == 75)
        for holder in ["bob", "carol"] { try w.serves[holder]!.waitFor("emergency request [0-9a-f]{8}: dave asks") }
        let listed = try w["alice"].vault.run("requests")
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains("dave asks for emergency access to 'passport'"), "\(listed.stdout) \(listed.stderr)")
        #expect(listed.stderr.contains("the relays were read just now"), "\(listed.stderr)")
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
        let recovery = try w["alice"].vault.background(["recover", id, "--wait", "--timeout", "60"], log: w.directory.file("recover.log"))
        let asked = try w.serves["carol"]!.waitFor("release request ([0-9a-f]{8}): 'alice' asks for piece 3")
        try w["bob"].ok("approve", try w.request(at: "bob", from: "alice"))
        #expect(recovery.wait() == 0, "\(recovery.log)")
        try w.serves["carol"]!.waitFor("'alice' withdrew request \(asked): its recovery is over")
        #expect(!(try w["carol"].ok("requests")).contains(asked))
        let received = try w["dave"].vault.run("receive")
        #expect(received.stderr.contains("'alice' withdrew request"), "\(received.stderr)")
        #expect(try w["dave"].ok("requests").isEmpty)
    }
}
