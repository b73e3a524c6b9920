import Foundation
import GRDB
import Testing
@testable import VaultCore
@testable import VaultHolders
@testable import VaultRelayClient
import VaultTestSupport

extension HoldersWorld {
    /// Alice shares `note` ('passport') 2 of n with `holders` (bob and carol), naming dave for
    /// emergency access after `wait`; each holder keeps its share and takes the role, or
    /// declines it (`takes` false), without a serve (`vault receive`, `vault approve|deny`).
    func shareWithEmergency(_ note: String, wait: String, holders: [String] = ["bob", "carol"], takes: [String: Bool] = [:]) throws -> String {
        let shared = try self["alice"].vault.run(["share", "-", "--to", holders.joined(separator: ","), "-k", "2", "--description", "passport",
                                                  "--emergency", "dave:\(wait)"], stdin: Array(note.utf8))
        #expect(shared.status == 0, "\(shared.stderr)")
        #expect(shared.stderr.contains("'dave' may recover it"), "\(shared.stderr)")
        #expect(shared.stderr.contains("bob: emergency rule sent through the relays of friends (3 of 3 stored it)"), "\(shared.stderr)")
        let id = shared.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        for holder in holders {
            try self[holder].ok("approve", try request(at: holder, containing: "'alice' offers you share"))
            let role = try request(at: holder, containing: "alice names dave for emergency access to 'passport'")
            try self[holder].ok(takes[holder] ?? true ? "approve" : "deny", role)
        }
        return id
    }

    /// The id of the waiting request at `label` whose line contains `text`, once there is one.
    func request(at label: String, containing text: String, timeout: Double = 20) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if serves[label] == nil { _ = try self[label].vault.run("receive") }
            let listed = try self[label].ok("requests")
            if let line = listed.split(separator: "\n").first(where: { $0.contains(text) }) { return String(line.prefix(8)) }
            usleep(200_000)
        }
        throw Failure("no request with \(text) at \(label)")
    }

    /// Alice's card, as `--dealer` takes it.
    func aliceCard() throws -> String { String(try self["alice"].card().split(separator: "#")[0]) }

    /// Dave asks `holders` through the relays for the secret he holds no share of.
    func daveRecovers(_ id: String, _ extra: [String] = [], from holders: [String] = ["bob", "carol"]) throws -> ProcessResult {
        try self["dave"].vault.run(["recover", id, "--dealer", try aliceCard(), "--from", holders.joined(separator: ",")] + extra)
    }

    /// Makes the relays drop every holder message from `sender` to `recipient` stored from
    /// now on, as a relay that withholds them would: the sender is told it was stored.
    func dropMessages(from sender: String, to recipient: String) throws {
        let from = try KeyCard(text: String(try self[sender].card().split(separator: "#")[0]))
        let to = try KeyCard(text: String(try self[recipient].card().split(separator: "#")[0]))
        for i in 1...3 {
            let relay = try DatabaseQueue.beside(directory.file("r\(i).db"))
            try relay.write { db in
                try db.execute(sql: """
                    CREATE TRIGGER drop_\(sender)_\(recipient) AFTER INSERT ON recipients
                    WHEN NEW.signing_key = X'\(to.signingKey.hex)' AND (SELECT sender FROM messages WHERE row = NEW.message) = X'\(from.signingKey.hex)'
                    BEGIN DELETE FROM recipients WHERE message = NEW.message AND signing_key = NEW.signing_key; END
                    """)
            }
        }
    }
}

/// Emergency access (issue 34): alice names dave, in advance, to have her secret after a
/// wait that she can cut short; bob and carol, her holders, take the role or decline it.
/// Three relays on loopback and real serves; waits of seconds.
@Suite(.serialized) struct EmergencyAccessTests {
    /// The wait passes with no denial: each holder that took the role releases its piece on
    /// its own, and dave recovers the secret. Each holder showed the wait and told alice at
    /// once, and every step is in its release log.
    @Test func theWaitEndsAndTheTrusteeRecovers() throws {
        let w = try HoldersWorld(["alice", "bob", "carol", "dave"])
        let id = try w.shareWithEmergency("passport 123", wait: "30s")
        let answers = try w["alice"].vault.run("receive")
        #expect(answers.stderr.contains("'bob': emergency role accepted"), "\(answers.stderr)")
        #expect(try w["alice"].ok("secrets", "show", id).contains("bob: role accepted (relays of friends)"))
        #expect(try w["bob"].ok("secrets", "show", id).contains("'alice' names 'dave', after 30 seconds: you took the role"))
        try w.serve("bob")
        try w.serve("carol")

        let start = Date()
        let recovery = try w["dave"].vault.background(["recover", id, "--dealer", try w.aliceCard(), "--from", "bob,carol", "--wait", "--timeout", "90"],
                                                     log: w.directory.file("dave.log"))
        // Each holder starts the wait on receipt and shows it.
        for holder in ["bob", "carol"] {
            try w.serves[holder]!.waitFor("emergency request [0-9a-f]{8}: dave asks for emergency access to 'passport' as alice allowed; "
                                          + "released on [0-9: -]+ unless alice denies")
        }
        let listed = try w["bob"].ok("requests")
        #expect(listed.contains("dave asks for emergency access to 'passport' as alice allowed; released on "), "\(listed)")
        // Alice is told at once, with the date it completes.
        let told = try w["alice"].vault.run("receive")
        #expect(told.stderr.contains("dave asks for emergency access to 'passport' through "), "\(told.stderr)")
        let waiting = try w["alice"].ok("requests")
        #expect(waiting.contains("dave asks for emergency access to 'passport' through "), "\(waiting)")
        #expect(waiting.contains("unless you deny"), "\(waiting)")
        #expect(Date().timeIntervalSince(start) < 30, "the wait ended before alice could look: the test machine is too slow")
        #expect(!recovery.log.contains("piece received"), "a piece came before the wait ended: \(recovery.log)")

        // The wait passes (the world's clock moves on), and the holders release on their own.
        w.clock.advance(by: 30)
        #expect(recovery.wait() == 0, "\(recovery.log)")
        #expect(recovery.log.contains("passport 123"), "\(recovery.log)")
        #expect(recovery.log.contains("emergency access: released on"), "\(recovery.log)")
        #expect(recovery.log.contains("recovered note \(id.prefix(16)) from pieces 2, 3"), "\(recovery.log)")
        for holder in ["bob", "carol"] {
            let shown = try w["bob" == holder ? "bob" : "carol"].ok("secrets", "show", id)
            #expect(shown.contains("dave (index 0)  emergency role accepted"), "\(shown)")
            #expect(shown.contains("dave (index 0)  emergency wait started (releases at "), "\(shown)")
            #expect(shown.contains("dave (index 0)  released after the emergency wait"), "\(shown)")
        }
        let released = try w["alice"].vault.run("receive")
        #expect(released.stderr.contains("released its piece to dave"), "\(released.stderr)")
    }

    /// Alice's serve shows dave's request as soon as a holder tells of it; she denies it
    /// halfway from her other machine (a copy of her keystore, with her identity): every
    /// holder cancels, nobody releases after the wait, dave sees the denial, and her serve
    /// learns of it too.
    @Test func theDealerDeniesFromAnotherMachineAndNobodyReleases() throws {
        let w = try HoldersWorld(["alice", "bob", "carol", "dave"])
        // A wait the steps before the denial fit well inside on a loaded machine (they took
        // 20 s and more in CI): a denial that came after it would find the pieces released.
        let id = try w.shareWithEmergency("passport 123", wait: "60s")
        try w["alice"].ok("receive")
        let laptop = User("alice-laptop")
        laptop.vault.environment.merge(w.clock.environment) { $1 }
        try FileManager.default.copyItem(atPath: w["alice"].vault.home, toPath: laptop.directory.file("home"))
        try w.serve("alice")
        try w.serve("bob")
        try w.serve("carol")
        let start = Date()
        #expect(try w.daveRecovers(id, ["--ttl", "1h"]).status == 75)
        for holder in ["bob", "carol"] { try w.serves[holder]!.waitFor("emergency request [0-9a-f]{8}: dave asks") }
        let shown = try w.serves["alice"]!.waitFor("emergency request ([0-9a-f]{8}): dave asks for emergency access to 'passport' through "
                                                   + "(bob|carol); released on [0-9: -]+ unless you deny")

        let seen = try laptop.vault.run("receive")
        #expect(seen.stderr.contains("dave asks for emergency access to 'passport'"), "\(seen.stderr)")
        let line = try #require(try laptop.ok("requests").split(separator: "\n").first { $0.contains("dave asks for emergency access") })
        let request = String(line.prefix(8))
        #expect(request == shown, "the request's id differs between alice's machines")
        let denied = try laptop.vault.run("deny", request)
        #expect(denied.status == 0, "\(denied.stderr)")
        #expect(denied.stderr.contains("denied dave's emergency access to 'passport' (request \(request)): every holder is told to cancel it"),
                "\(denied.stderr)")
        for holder in ["bob", "carol"] { try w.serves[holder]!.waitFor("'alice' denied dave's emergency access: cancelled here") }
        #expect(Date().timeIntervalSince(start) < 60, "the wait ended before the denial: the test machine is too slow")

        // Past the wait: nothing released (a release is sent within a tenth of a second of
        // the clock's move, and shown at once), and nothing waits.
        w.clock.advance(by: 62)
        let released = try eventually(within: 3) {
            try ["bob", "carol"].contains { try w[$0].ok("secrets", "show", id).contains("dave (index 0)  released") }
        }
        #expect(!released, "a holder released after its person's dealer denied")
        for holder in ["bob", "carol"] {
            let shown = try w[holder].ok("secrets", "show", id)
            #expect(shown.contains("dave (index 0)  denied by the dealer"), "\(shown)")
            #expect(!shown.contains("dave (index 0)  released"), "\(shown)")
            #expect(try w[holder].ok("requests").isEmpty)
        }
        let again = try w.daveRecovers(id)
        #expect(again.status == 1, "\(again.stderr)")
        #expect(again.stderr.contains("bob: denied by the secret's dealer (asked before)"), "\(again.stderr)")
        // What each holder answered, not "0 needed" (no piece came to tell the threshold).
        #expect(again.stderr.contains("vault: error: no piece came through relays, and none will: bob denied by the secret's dealer; "
                                      + "carol denied by the secret's dealer"), "\(again.stderr)")
        #expect(!again.stdout.contains("passport 123"))
        // The machine that did not deny learns it too.
        try w.serves["alice"]!.waitFor("cancelled dave's emergency request \(request), as you denied")
    }

    /// Alice approves at once: the holders release without waiting out the hour, and dave
    /// recovers; erin, who took the role too, refuses the request herself, and her refusal
    /// stands whatever the dealer says.
    @Test func theDealerApprovesAtOnceAndAHolderStillRefuses() throws {
        let w = try HoldersWorld(["alice", "bob", "carol", "dave", "erin"])
        let holders = ["bob", "carol", "erin"]
        let id = try w.shareWithEmergency("passport 123", wait: "1h", holders: holders)
        for holder in holders { try w.serve(holder) }
        #expect(try w.daveRecovers(id, ["--ttl", "2h"], from: holders).status == 75)
        for holder in holders { try w.serves[holder]!.waitFor("emergency request [0-9a-f]{8}: dave asks") }
        let erins = try w.request(at: "erin", containing: "dave asks for emergency access")
        let early = try w["erin"].vault.run("approve", erins)
        #expect(early.status == 1 && early.stderr.contains("only alice, the secret's dealer, can end the wait early"), "\(early.stderr)")
        try w["erin"].ok("deny", erins)

        let request = try w.request(at: "alice", containing: "dave asks for emergency access")
        let approved = try w["alice"].vault.run("approve", request)
        #expect(approved.stderr.contains("approved dave's emergency access to 'passport' (request \(request)): every holder is told to release now"),
                "\(approved.stderr)")
        let recovered = try w.daveRecovers(id, ["--wait", "--timeout", "60"], from: holders)
        #expect(recovered.status == 0, "\(recovered.stderr)")
        #expect(recovered.stdout == "passport 123")
        #expect(recovered.stderr.contains("erin: denied (asked before)") || recovered.stderr.contains("erin: denied\n"), "\(recovered.stderr)")
        for holder in ["bob", "carol"] {
            #expect(try w[holder].ok("secrets", "show", id).contains("dave (index 0)  approved by the dealer"))
        }
        let erin = try w["erin"].ok("secrets", "show", id)
        #expect(erin.contains("dave (index 0)  denied") && !erin.contains("dave (index 0)  approved by the dealer"), "\(erin)")
    }

    /// Carol declines the role: only bob releases when the wait ends, and one piece is not
    /// enough; carol's copy of the request waits for her person as any other would.
    @Test func aHolderThatDeclinesLeavesTheTrusteeShort() throws {
        let w = try HoldersWorld(["alice", "bob", "carol", "dave"])
        let id = try w.shareWithEmergency("passport 123", wait: "1h", takes: ["bob": true, "carol": false])
        let answers = try w["alice"].vault.run("receive")
        #expect(answers.stderr.contains("'carol': emergency role declined"), "\(answers.stderr)")
        #expect(try w["alice"].ok("secrets", "show", id).contains("carol: role declined"))
        #expect(try w["carol"].ok("secrets", "show", id).contains("you declined the role"))
        try w.serve("bob")
        try w.serve("carol")
        #expect(try w.daveRecovers(id, ["--ttl", "2h"]).status == 75)
        try w.serves["bob"]!.waitFor("emergency request [0-9a-f]{8}: dave asks")
        // The hour passes.
        w.clock.advance(by: 3601)
        try w.serves["bob"]!.waitFor("answered 'dave' about its emergency request")
        let recovery = try w.daveRecovers(id)
        #expect(recovery.status == 75, "\(recovery.stderr)")
        #expect(recovery.stderr.contains("bob: piece received"), "\(recovery.stderr)")
        #expect(!recovery.stdout.contains("passport 123"))
        let atCarol = try w["carol"].ok("requests")
        #expect(atCarol.contains("'dave' asks for piece 3 of alice's note") && atCarol.contains("[holds no share; not alice's card]"), "\(atCarol)")
        #expect(try w["bob"].ok("secrets", "show", id).contains("dave (index 0)  released after the emergency wait"))
        let shown = try w["carol"].ok("secrets", "show", id)
        #expect(shown.contains("dave (index 0)  emergency role declined"), "\(shown)")
        #expect(!shown.contains("dave (index 0)  released"), "\(shown)")
    }

    /// A rule alice never signed (dave signs one naming himself), and a rule alice did sign
    /// passed on by someone else, are both refused: bob takes no role, and dave's request is
    /// then one from someone who holds no share, which waits for bob's person.
    @Test func aForgedRuleIsRefused() async throws {
        let w = try HoldersWorld(["alice", "bob", "carol", "dave"])
        let id = try w.share("passport 123", with: ["bob", "carol"])
        let alice = try Keystore.open(home: VaultHome(directory: w["alice"].vault.home))
        let dealer = try alice.unlock(passphrase: nil)
        let header = try alice.secret(matching: id).header
        let daves = try Keystore.open(home: VaultHome(directory: w["dave"].vault.home))
        let dave = try daves.unlock(passphrase: nil)
        let now = UInt64(Date().timeIntervalSince1970)
        let forged = EmergencyRule.signed(secretID: header.secretID, dealer: header.dealer, trustee: dave.card, wait: 1, issued: now, by: dave)
        let passedOn = try EmergencyRule.make(secretID: header.secretID, dealer: dealer, trustee: dave.card, wait: 1, issued: now)
        let bob = try daves.peer(named: "bob")
        for rule in [forged, passedOn] {
            let group = try daves.group(named: "friends")
            let stored = try await OwnThread.run {
                try await HolderMail.send(to: bob.card, in: group, lifetime: 3600, keystore: daves, identity: dave) { emit in
                    try HolderRecord.emergencyRule(rule).withUnsafeBytes(emit)
                }
            }
            #expect(stored.count == 3, "\(stored.why)")
        }
        let atBob = try w["bob"].vault.run("receive")
        #expect(atBob.stderr.contains("the emergency rule (it is not signed by the dealer it names)"), "\(atBob.stderr)")
        #expect(atBob.stderr.contains("refused an emergency rule from 'dave': it was sent by someone other than the dealer it names"),
                "\(atBob.stderr)")
        #expect(!(try w["bob"].ok("requests")).contains("emergency"))
        #expect(!(try w["bob"].ok("secrets", "show", id)).contains("emergency"))

        try w.serve("bob")
        #expect(try w.daveRecovers(id).status == 75)
        // Logged once bob's serve has sent dave its answer: waiting for bob's person.
        _ = try w.serves["bob"]!.waitFor("release request [0-9a-f]{8}: 'dave' asks for piece 2")
        let asked = try w.daveRecovers(id)
        #expect(asked.status == 75, "\(asked.stderr)")
        #expect(asked.stderr.contains("bob: waiting for its person to approve"), "\(asked.stderr)")
        #expect(try w["bob"].ok("requests").contains("'dave' asks for piece 2"))
        #expect(!(try w["bob"].ok("secrets", "show", id)).contains("dave (index 0)  released"))
    }

    /// A relay that holds dave's request back cannot shorten the wait: it runs from when
    /// bob received it. One that serves it again in a new message meets its nonce: refused
    /// as a replay, and bob's one wait goes on unchanged.
    @Test func aHeldBackOrReplayedRequestCannotShortenTheWait() async throws {
        let w = try HoldersWorld(["alice", "bob", "carol", "dave"])
        let id = try w.shareWithEmergency("passport 123", wait: "1h")
        try w.serve("bob")
        let daves = try Keystore.open(home: VaultHome(directory: w["dave"].vault.home))
        let dave = try daves.unlock(passphrase: nil)
        let dealer = try KeyCard(text: try w.aliceCard())
        let secretID = try #require([UInt8](hexID: id))
        let recovery = try daves.startRecovery(dealer: dealer, secretID: secretID, holdsShare: false, identity: dave, lifetime: 7200)
        let bob = try daves.peer(named: "bob"), group = try daves.group(named: "friends")
        // Made ten minutes ago, as if a relay had kept it since.
        let made = UInt64(Date().timeIntervalSince1970) - 600
        let request = try RelayPieceRequest.make(secretID: secretID, dealer: dealer, holder: bob.card, own: nil, identity: dave,
                                                 replyKey: recovery.replyPublicKey, lifetime: 7200, now: made)
        try daves.recordAsk(recovery, nonce: request.nonce, holder: bob, groupID: group.id)
        func send() async throws {
            let stored = try await OwnThread.run {
                try await HolderMail.send(to: bob.card, in: group, lifetime: 3600, keystore: daves, identity: dave) { emit in
                    try HolderRecord.pieceRequest(request).withUnsafeBytes(emit)
                }
            }
            #expect(stored.count == 3, "\(stored.why)")
        }
        let sent = Date()
        try await send()
        try w.serves["bob"]!.waitFor("emergency request [0-9a-f]{8}: dave asks")
        let bobs = try Keystore.open(home: VaultHome(directory: w["bob"].vault.home))
        let waits = try bobs.holderRequests([.waiting]).filter { $0.emergency != nil }
        #expect(waits.count == 1)
        let releaseAt = try #require(waits.first?.releaseAt)
        #expect(releaseAt.timeIntervalSince(sent) >= 3600 - 1, "the wait was counted from the request's own time")

        try await send()
        try w.serves["bob"]!.waitFor("refused a piece request from 'dave': the holder has answered this request before \\(a replay\\)")
        let after = try bobs.holderRequests([.waiting]).filter { $0.emergency != nil }
        #expect(after.count == 1 && after.first?.releaseAt == releaseAt)
        #expect(try bobs.releaseRecord(secretID: secretID).filter { $0.decision == .emergencyWait }.count == 1)
    }

    /// The relays drop alice's denial to carol: bob cancels, carol (who never got it)
    /// releases when her wait ends, as Docs/SECURITY.md says; one piece is not enough for
    /// dave, and alice sees which holder released.
    @Test func aDenialDroppedOnTheWayToOneHolder() throws {
        let w = try HoldersWorld(["alice", "bob", "carol", "dave"])
        // A wait the steps up to bob's cancel fit well inside on a loaded machine.
        let id = try w.shareWithEmergency("passport 123", wait: "60s")
        try w["alice"].ok("receive")
        try w.serve("bob")
        try w.serve("carol")
        #expect(try w.daveRecovers(id, ["--ttl", "1h"]).status == 75)
        for holder in ["bob", "carol"] { try w.serves[holder]!.waitFor("emergency request [0-9a-f]{8}: dave asks") }
        try w.dropMessages(from: "alice", to: "carol")
        let request = try w.request(at: "alice", containing: "dave asks for emergency access")
        try w["alice"].ok("deny", request)
        try w.serves["bob"]!.waitFor("'alice' denied dave's emergency access: cancelled here")
        w.clock.advance(by: 60)
        try w.serves["carol"]!.waitFor("answered 'dave' about its emergency request")
        #expect(try w["carol"].ok("secrets", "show", id).contains("dave (index 0)  released after the emergency wait"))
        #expect(try w["bob"].ok("secrets", "show", id).contains("dave (index 0)  denied by the dealer"))

        // Every holder has answered: nothing more will come, so it fails (it once exited 75,
        // as if an answer were still to come).
        let recovered = try w.daveRecovers(id)
        #expect(recovered.status == 1, "\(recovered.stderr)")
        #expect(recovered.stderr.contains("vault: error: only 1 verified piece, 2 needed; missing: bob\n"
                                          + "vault: hint: every holder asked has answered (the lines above say how); "), "\(recovered.stderr)")
        #expect(recovered.stderr.contains("bob: denied by the secret's dealer"), "\(recovered.stderr)")
        #expect(recovered.stderr.contains("carol: piece received"), "\(recovered.stderr)")
        #expect(!recovered.stdout.contains("passport 123"))
        // Alice sees that her denial reached bob and not carol, who released.
        try w["alice"].ok("receive")
        let shown = try w["alice"].ok("secrets", "show", id)
        #expect(shown.contains("bob: cancelled; your decision sent"), "\(shown)")
        #expect(shown.contains("carol: released; your decision sent"), "\(shown)")
    }

    /// The rule goes over the LAN where the share does: bob's serve takes both, his person
    /// takes the role with 'vault approve', and the answer reaches alice through the relays.
    @Test func theRuleGoesOverTheLANWithTheShare() throws {
        let w = try HoldersWorld(["alice", "bob", "carol", "dave"])
        let serve = try w["bob"].vault.background(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"],
                                                  log: w.directory.file("bob-lan.log"))
        let port = try serve.waitFor("listening on 127.0.0.1:([0-9]+)")
        try serve.waitFor("agent listening on")
        w.serves["bob"] = serve
        let shared = try w["alice"].vault.run(["share", "-", "--to", "bob", "-k", "2", "--description", "passport", "--emergency", "dave:1h",
                                               "--peer", "bob=127.0.0.1:\(port)"], stdin: Array("passport 123".utf8))
        #expect(shared.status == 0, "\(shared.stderr)")
        #expect(shared.stderr.contains("bob: delivered to 127.0.0.1:\(port)"), "\(shared.stderr)")
        #expect(shared.stderr.contains("bob: emergency rule delivered to 127.0.0.1:\(port): waiting for consent"), "\(shared.stderr)")
        #expect(shared.stderr.contains("a wait under a day"), "\(shared.stderr)")
        let id = shared.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let role = try serve.waitFor("emergency role ([0-9a-f]{8}): alice names dave for emergency access to 'passport'")
        try w["bob"].ok("approve", role)
        try serve.waitFor("answered 'alice' about its emergency rule")
        let answers = try w["alice"].vault.run("receive")
        #expect(answers.stderr.contains("'bob': emergency role accepted"), "\(answers.stderr)")
        #expect(try w["alice"].ok("secrets", "show", id).contains("bob: role accepted (LAN 127.0.0.1:\(port))"))
        #expect(try w["bob"].ok("secrets", "show", id).contains("you took the role"))
    }
}
