import Foundation
import GRDB
import Testing
@testable import VaultCore
@testable import VaultHolders
@testable import VaultRelayClient
import VaultTestSupport

/// Holders in other cities (issue 33): three relays on loopback, and people who trust each
/// other and share a group on them, with no LAN path between them: nobody is given another's
/// address, and their serves (where they run) listen on loopback without announcing.
final class HoldersWorld {
    let directory = TemporaryDirectory("vault-holders")
    /// Every process here reads this clock: a wait passes with `clock.advance(by:)`.
    let clock = TestClock()
    var relays: [BackgroundProcess] = []
    var urls: [String] = []
    var users: [String: User] = [:]
    var serves: [String: BackgroundProcess] = [:]
    /// With `inCities`: the relays' namespace, and one namespace a person, joined to the
    /// relays only (``NetworkNamespace/star(hosts:)``): no LAN between anyone.
    let cities: (servers: NetworkNamespace, hosts: [NetworkNamespace])?

    /// `members` trust each other and are in `owner`'s group "friends" on the three relays
    /// (with `group` false, in no group yet). `inCities` puts each person in a network
    /// namespace of its own, with the relays (on the namespaces' internet, admitting any
    /// owner) as the only way between them.
    init(_ members: [String], owner: String = "alice", group: Bool = true, inCities: Bool = false) throws {
        cities = inCities ? try NetworkNamespace.star(hosts: members.count + 2) : nil
        for i in 1...3 {
            var arguments = ["relay", "serve", "--listen", inCities ? NetworkNamespace.serverAddress + ":0" : "127.0.0.1:0", "--sweep-interval", "3600",
                             "--store", "sqlite:" + directory.file("r\(i).db")]
            if inCities { arguments += ["--group-owners", "anyone"] }
            let (executable, all) = cities.map { $0.servers.wrap(VaultBinary.path, arguments) } ?? (VaultBinary.path, arguments)
            let relay = try BackgroundProcess(executable, all, environment: clock.environment, logPath: directory.file("r\(i).log"))
            urls.append(try relay.waitFor("listening on (http://[0-9.:]+)"))
            relays.append(relay)
        }
        for label in members { try add(label) }
        guard group else { return }
        try self[owner].ok(["group", "create", "friends", "--relays", "r1,r2,r3", "--members", members.filter { $0 != owner }.joined(separator: ",")])
        for label in members where label != owner { try self[label].ok("receive") }
    }

    deinit {
        for serve in serves.values { _ = serve.stop(SIGKILL) }
        for relay in relays { _ = relay.stop(SIGKILL) }
    }

    subscript(_ label: String) -> User { users[label]! }

    /// A new person who trusts, and is trusted by, everyone here, and pins the relays.
    func add(_ label: String) throws {
        let user = User(label)
        user.vault.environment.merge(clock.environment) { $1 }
        if let cities { user.vault.launcher = cities.hosts[users.count].wrap }
        _ = try user.initialize(label)
        for (other, known) in users {
            try user.ok("peer", "add", try known.card(), "--label", other, "--yes")
            try known.ok("peer", "add", try user.card(), "--label", label, "--yes")
        }
        for (i, url) in urls.enumerated() { try user.ok("relay", "add", "r\(i + 1)", url, "--yes") }
        users[label] = user
    }

    /// Starts `label`'s serve on loopback; it watches the relays.
    func serve(_ label: String, _ extra: [String] = []) throws {
        let serve = try self[label].vault.background(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"] + extra,
                                                     log: directory.file("\(label)-serve-\(UUID().uuidString).log"))
        try serve.waitFor("agent listening on")
        serves[label] = serve
    }

    /// The id of the request from `peer` waiting at `label`, once there is one.
    func request(at label: String, from peer: String, timeout: Double = 20) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if serves[label] == nil { _ = try self[label].vault.run("receive") }
            let listed = try self[label].ok("requests")
            if let line = listed.split(separator: "\n").first(where: { $0.contains("'\(peer)'") }) { return String(line.prefix(8)) }
            usleep(200_000)
        }
        throw Failure("no request from \(peer) at \(label)")
    }

    /// Alice shares `note` 2 of n with `holders` through the relays; each holder keeps it.
    func share(_ note: String, with holders: [String], k: Int = 2) throws -> String {
        let id = try self["alice"].ok(["share", "-", "--to", holders.joined(separator: ","), "-k", String(k), "--description", "boat"],
                                      stdin: note).trimmingCharacters(in: .whitespacesAndNewlines)
        for holder in holders {
            try self[holder].ok("approve", try request(at: holder, from: "alice"))
        }
        return id
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

@Suite(.serialized) struct HoldersAnywhereTests {
    /// Sharing 2 of 3 with two holders who are not on the LAN: the bundles go through the
    /// relays, each holder is asked before keeping its share (here without a serve, through
    /// `vault receive` and `vault approve`), and the dealer learns where each one stands.
    @Test func sharesToRemoteHoldersWhoAreAskedFirst() throws {
        let w = try HoldersWorld(["alice", "bob", "carol"])
        // A misspelt group, or a holder not in the group named, is refused before anything is
        // dealt (the keystore unchanged): it once left the secret made, under its name, and
        // its bundles in the outbox.
        let misspelt = try w["alice"].fails(["share", "-", "--to", "bob,carol", "-k", "2", "--group", "frends", "--name", "safe"], stdin: "six")
        #expect(misspelt.hasPrefix("vault: error: no group matches 'frends'\n"), "\(misspelt)")
        try w.add("erin")
        let outsider = try w["alice"].fails(["share", "-", "--to", "bob,erin", "-k", "2", "--group", "friends"], stdin: "six")
        #expect(outsider.hasPrefix("vault: error: 'erin' is not a member of group friends\n"), "\(outsider)")
        #expect(try w["alice"].ok("secrets", "list").isEmpty)
        let shared = try w["alice"].vault.run(["share", "-", "--to", "bob,carol", "-k", "2", "--description", "boat"], stdin: Array("six".utf8))
        #expect(shared.status == 0, "\(shared.stderr)")
        #expect(shared.stderr.contains("bob: sent through the relays of friends (3 of 3 stored it)"), "\(shared.stderr)")
        let id = shared.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try w["alice"].ok("secrets", "show", id).contains("bob (index 2)  sent (relays of friends)"))

        // Bob is asked: who deals, the type, the public description and K of n.
        let received = try w["bob"].vault.run("receive")
        #expect(received.stderr.contains("'alice' offers you share 2 of note \(id.prefix(16)) (boat), 2 of 3 needed, relays of friends"),
                "\(received.stderr)")
        #expect(try w["bob"].ok("secrets", "list").isEmpty, "nothing is kept before bob says yes")
        try w["bob"].ok("approve", try w.request(at: "bob", from: "alice"))
        #expect(try w["bob"].ok("secrets", "list").contains(String(id.prefix(16))))
        // Carol says no.
        try w["carol"].ok("deny", try w.request(at: "carol", from: "alice"))
        #expect(try w["carol"].ok("secrets", "list").isEmpty)

        let answers = try w["alice"].vault.run("receive")
        #expect(answers.stderr.contains("'bob': share of \(id.prefix(16)) delivered"), "\(answers.stderr)")
        let shown = try w["alice"].ok("secrets", "show", id)
        #expect(shown.contains("bob (index 2)  delivered (relays of friends)"), "\(shown)")
        #expect(shown.contains("carol (index 3)  refused (relays of friends)"), "\(shown)")
    }

    /// Recovery through relays 2 of 4: bob approves with `vault approve` from another shell
    /// while his serve runs, carol denies, dave never answers. The first `vault recover`
    /// returns saying who was asked; a second one, later, finishes with what arrived and asks
    /// nobody twice.
    @Test func recoversThroughRelaysWithConsentAcrossTwoRuns() throws {
        let w = try HoldersWorld(["alice", "bob", "carol", "dave"])
        let id = try w.share("the boat leaves at six", with: ["bob", "carol", "dave"], k: 3)
        try w.serve("bob")
        try w.serve("carol")

        // An output file that exists is said before any holder is asked (it once came after
        // their pieces): the keystore is unchanged, so no request was recorded.
        let existing = w.directory.file("exists.txt")
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: existing))
        let refused = try w["alice"].fails(["recover", id, "-o", existing])
        #expect(refused.contains("exists.txt already exists"), "\(refused)")
        #expect(FileManager.default.contents(atPath: existing) == Data("keep me".utf8))

        let first = try w["alice"].vault.run(["recover", id, "--ttl", "1h"])
        #expect(first.status == 75, "\(first.stderr)")
        for holder in ["bob", "carol", "dave"] {
            #expect(first.stderr.contains("  \(holder): asked through the relays of friends"), "\(first.stderr)")
        }
        #expect(first.stderr.contains("run 'vault recover \(id.prefix(16))' again once they answer"), "\(first.stderr)")

        // Bob's serve shows the request; he approves from another shell. Carol denies.
        let bobs = try w.request(at: "bob", from: "alice")
        _ = try w.serves["bob"]!.waitFor("release request \(bobs): 'alice' asks for piece 2 of note")
        try w["bob"].ok("approve", bobs)
        let carols = try w.request(at: "carol", from: "alice")
        try w["carol"].ok("deny", carols)
        // Decided through their serves, which send the answers at their next pass.
        try w.serves["bob"]!.waitFor("answered 'alice' about its piece request \(bobs)")
        try w.serves["carol"]!.waitFor("answered 'alice' about its piece request \(carols)")

        // Three needed: alice's own, bob's, and one of carol (denied) or dave (silent).
        let second = try w["alice"].vault.run(["recover", id])
        #expect(second.status == 75, "\(second.stderr)")
        #expect(second.stderr.contains("bob: piece received (asked before)"), "\(second.stderr)")
        #expect(second.stderr.contains("carol: denied (asked before)"), "\(second.stderr)")
        #expect(second.stderr.contains("dave: asked through relays, no answer yet (asked before)"), "\(second.stderr)")
        // Nobody was asked twice.
        #expect(try w["bob"].ok("requests").isEmpty)

        // Dave answers later; the third run finishes.
        try w["dave"].ok("approve", try w.request(at: "dave", from: "alice"))
        let third = try w["alice"].vault.run(["recover", id])
        #expect(third.status == 0, "\(third.stderr)")
        #expect(third.stdout == "the boat leaves at six")
        #expect(third.stderr.contains("piece 2 from 'bob' (through relays): verified"), "\(third.stderr)")
        // Every step is in the holders' release logs.
        #expect(try w["bob"].ok("secrets", "show", id).contains("alice (index 1)  approved"))
        #expect(try w["carol"].ok("secrets", "show", id).contains("alice (index 1)  denied"))
    }

    /// With the holders' serves running and automatic release on, `recover --wait` finishes
    /// in one run with one relay down; a relay that alters what it serves is named, and the
    /// other relays' copies are used.
    @Test func waitsThroughARelayDownAndAnAlteringRelay() throws {
        let w = try HoldersWorld(["alice", "bob", "carol"])
        let id = try w.share("wifi: hunter2", with: ["bob", "carol"])
        let door = try w.share("door: 1234", with: ["bob", "carol"])
        for holder in ["bob", "carol"] { try w[holder].ok("secrets", "auto-release", "--for", "alice") }
        #expect(w.relays[2].stop(SIGTERM) == 0)
        // Relay 1 alters the last byte of every message bob stores there from now on.
        let bob = try KeyCard(text: String(try w["bob"].card().split(separator: "#")[0]))
        let altering = try DatabaseQueue.beside(w.directory.file("r1.db"))
        try altering.write { db in
            try db.execute(sql: """
                CREATE TRIGGER alter_bob AFTER INSERT ON chunks
                WHEN (SELECT sender FROM messages WHERE row = NEW.message) = X'\(bob.signingKey.hex)'
                BEGIN UPDATE chunks SET bytes = substr(NEW.bytes, 1, length(NEW.bytes) - 1)
                    || CASE WHEN hex(substr(NEW.bytes, -1)) = '00' THEN X'01' ELSE X'00' END
                    WHERE message = NEW.message AND n = NEW.n; END
                """)
        }
        // Asked for the door's code before bob's serve runs: its answer is on r1 and r2 (two
        // must store it, and r3 is down) before alice looks again, so she reads r1's altered
        // copy first, whatever the timing. (The answer to a request she waits for wakes her
        // from whichever relay stores it first, and she need never read r1's.)
        let asked = try w["alice"].vault.run(["recover", door])
        #expect(asked.status == 75, "\(asked.stderr)")
        try w.serve("bob")
        _ = try w.serves["bob"]!.waitFor("released your piece of \(door.prefix(16)) to 'alice' through relays")

        // Every holder message waiting is taken at her first look: the door's answer too.
        let recovered = try w["alice"].vault.run(["recover", id, "--wait", "--timeout", "60"])
        #expect(recovered.status == 0, "\(recovered.stderr)")
        #expect(recovered.stdout == "wifi: hunter2")
        #expect(recovered.stderr.contains("relay r1: it served a damaged or forged object message"), "\(recovered.stderr)")
        #expect(recovered.stderr.contains("bob: piece received"), "\(recovered.stderr)")
        // The door's piece came from r2's copy.
        let opened = try w["alice"].vault.run(["recover", door])
        #expect(opened.status == 0, "\(opened.stderr)")
        #expect(opened.stdout == "door: 1234")
        #expect(opened.stderr.contains("piece 2 from 'bob' (through relays): verified"), "\(opened.stderr)")

        // With a second relay down, a request cannot reach the two relays it needs: each
        // relay that did not store it is named, with why.
        #expect(w.relays[1].stop(SIGTERM) == 0)
        let short = try w["alice"].vault.run(["recover", id])
        #expect(short.status != 0)
        #expect(short.stderr.contains("the relays of friends: only 1 of its 3 relays stored it, and 2 must: relay r2: cannot reach it"),
                "\(short.stderr)")
        #expect(short.stderr.contains("; relay r3: cannot reach it"), "\(short.stderr)")
    }

    /// Alice's laptop is gone. Her new identity, trusted again by bob and carol face to
    /// face, asks for pieces of a secret it holds no share of: each holder's prompt flags it,
    /// it is never released automatically, and with k approvals the new machine recovers it.
    @Test func socialRecoveryOntoANewMachine() throws {
        let w = try HoldersWorld(["alice", "bob", "carol"])
        let id = try w.share("passport 123", with: ["bob", "carol"])
        // Automatic release for alice's old card does not cover her new one, and even an
        // opt-in for the new card releases nothing to a requester that holds no share.
        for holder in ["bob", "carol"] { try w[holder].ok("secrets", "auto-release", "--for", "alice") }
        let oldCard = try w["alice"].card()
        try w.add("alice-new")
        try w["carol"].ok("secrets", "auto-release", "--for", "alice-new")
        // The old group's owner is gone: bob makes a new one with carol and alice-new.
        try w["bob"].ok("group", "create", "rescue", "--relays", "r1,r2,r3", "--members", "carol,alice-new")
        for label in ["carol", "alice-new"] { try w[label].ok("receive") }
        // A wrong dealer (bob, who holds a share of alice's): bob refuses, and the next run,
        // which asks him again (a refusal time may mend), first says what he said.
        #expect(try w["alice-new"].vault.run(["recover", id, "--dealer", "bob", "--from", "bob"]).status == 75)
        _ = try w["bob"].vault.run("receive")
        let wrong = try w["alice-new"].vault.run(["recover", id, "--dealer", "bob", "--from", "bob"])
        #expect(wrong.stderr.contains("  bob: refused: ") && wrong.stderr.contains("; asked through the relays of rescue"), "\(wrong.stderr)")
        let serve = try w["carol"].vault.onTerminal(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"])
        try serve.expect("agent listening on")

        // Without --wait: the command to run again names the secret by its whole id, all a
        // machine that holds no share of it takes, with the dealer and holders given.
        let dealer = String(oldCard.split(separator: "#")[0])
        let asked = try w["alice-new"].vault.run(["recover", id, "--dealer", dealer, "--from", "bob,carol"])
        #expect(asked.status == 75, "\(asked.stderr)")
        #expect(asked.stderr.contains("vault: hint: run 'vault recover \(id) --dealer \(dealer) --from bob,carol' again once they answer"), "\(asked.stderr)")
        let recovery = try w["alice-new"].vault.background(["recover", id, "--dealer", dealer, "--from", "bob,carol",
                                                           "--wait", "--timeout", "60"], log: w.directory.file("social.log"))
        // Whose secret it is, that the card asking is not its dealer's, both fingerprints; a
        // yes counts only with the dealer's label typed after it (a slip leaves it waiting).
        try serve.expect("'alice-new' asks for piece 3 of alice's note \(id.prefix(16)) (boat), relays of rescue [holds no share; not alice's card]")
        try serve.expect("'alice-new' holds no share of alice's secret and is not alice's card: it claims to be alice's new machine")
        let newFingerprint = try KeyCard(text: try w["alice-new"].card()).fingerprint, oldFingerprint = try KeyCard(text: dealer).fingerprint
        try serve.expect("fingerprints: 'alice-new' \(newFingerprint); alice \(oldFingerprint)")
        try serve.expect("? [y/N] ")
        serve.send("y")
        try serve.expect("Type 'alice' to confirm: ")
        serve.send("alice")
        let bobs = try w.request(at: "bob", from: "alice-new")
        let unconfirmed = try w["bob"].fails("approve", bobs)
        #expect(unconfirmed.contains("vault: error: request \(bobs) is from someone who holds no share: approving it needs the dealer's label as well"),
                "\(unconfirmed)")
        #expect(unconfirmed.contains("vault: hint: check it face to face, then add --confirm-dealer alice"), "\(unconfirmed)")
        let wrongLabel = try w["bob"].fails("approve", bobs, "--confirm-dealer", "carol")
        #expect(wrongLabel.contains("vault: error: 'carol' is not 'alice', the secret's dealer: nothing approved"), "\(wrongLabel)")
        let listed = try #require(try JSONSerialization.jsonObject(with: Data(try w["bob"].ok("requests", "--json").utf8)) as? [[String: Any]])
        let entry = try #require(listed.first { $0["id"] as? String == bobs })
        #expect(entry["dealer"] as? String == "alice" && entry["dealerFingerprint"] as? String == oldFingerprint
                && entry["peerFingerprint"] as? String == newFingerprint && entry["holdsNoShare"] as? Bool == true, "\(entry)")
        try w["bob"].ok("approve", bobs, "--confirm-dealer", "alice")
        #expect(recovery.wait() == 0, "\(recovery.log)")
        #expect(recovery.log.contains("recovered note \(id.prefix(16)) from pieces 2, 3"), "\(recovery.log)")
        #expect(try w["carol"].ok("secrets", "show", id).contains("alice-new (index 0)  approved"))
        serve.signal(SIGTERM)
        #expect(serve.finish().status == 0)
    }

    /// Requests that no command would send, made by alice's own keys in this process: one
    /// for bob's piece sent to carol (redirected), and one sent twice in two messages
    /// (replayed). Each holder refuses and says which check refused; the requester is told.
    @Test func replayedAndRedirectedRequestsAreRefusedAndSaid() async throws {
        let w = try HoldersWorld(["alice", "bob", "carol"])
        let id = try w.share("the boat leaves at six", with: ["bob", "carol"])
        let keystore = try Keystore.open(home: VaultHome(directory: w["alice"].vault.home))
        let identity = try keystore.unlock(passphrase: nil)
        let own = try keystore.secret(matching: id)
        let group = try keystore.group(named: "friends")
        let bob = try keystore.peer(named: "bob"), carol = try keystore.peer(named: "carol")
        let recovery = try keystore.startRecovery(dealer: own.header.dealer, secretID: own.header.secretID, holdsShare: true,
                                                  identity: identity, lifetime: 3600)
        func request(for holder: Peer) throws -> RelayPieceRequest {
            try RelayPieceRequest.make(secretID: own.header.secretID, dealer: own.header.dealer, holder: holder.card, own: own,
                                       identity: identity, replyKey: recovery.replyPublicKey, lifetime: 3600)
        }
        func send(_ request: RelayPieceRequest, to holder: Peer) async throws {
            let stored = try await OwnThread.run {
                try await HolderMail.send(to: holder.card, in: group, lifetime: 3600, keystore: keystore, identity: identity) { emit in
                    try HolderRecord.pieceRequest(request).withUnsafeBytes(emit)
                }
            }
            #expect(stored.count == 3, "\(stored.why)")
        }

        // Bob's request, carried to carol.
        try await send(try request(for: bob), to: carol)
        let atCarol = try w["carol"].vault.run("receive")
        #expect(atCarol.stderr.contains("refused a piece request from 'alice': the request was made for another holder"), "\(atCarol.stderr)")
        #expect(try w["carol"].ok("requests").isEmpty)

        // One request, twice: the second is a replay.
        let once = try request(for: bob)
        try await send(once, to: bob)
        try await send(once, to: bob)
        let atBob = try w["bob"].vault.run("receive")
        #expect(atBob.stderr.contains("release request"), "\(atBob.stderr)")
        #expect(atBob.stderr.contains("refused a piece request from 'alice': the holder has answered this request before (a replay)"),
                "\(atBob.stderr)")
        #expect(try w["bob"].ok("requests").split(separator: "\n").count == 1)

        // Alice hears of both refusals; neither answers a request of hers that is under way.
        let atAlice = try w["alice"].vault.run("receive")
        #expect(atAlice.stderr.contains("refused an answer to no request under way here"), "\(atAlice.stderr)")
    }

    /// Requests live as long as `--ttl` says (short here): an unanswered one expires at its
    /// holder, who answers that nobody approved in time and logs it, and the requester's next
    /// run starts again. A member removed from the group can neither ask nor be asked
    /// through it.
    @Test func requestsExpireAndRemovedMembersCannotAsk() throws {
        let w = try HoldersWorld(["alice", "bob", "carol"])
        let id = try w.share("the boat leaves at six", with: ["bob", "carol"])
        // Made during alice's run: it has surely expired when the world's clock is 21 s on.
        let first = try w["alice"].vault.run(["recover", id, "--ttl", "20s"])
        #expect(first.status == 75, "\(first.stderr)")
        // Bob sees it while it lives, and does not answer.
        #expect(try w["bob"].vault.run("receive").stderr.contains("'alice' asks for piece 2"))
        w.clock.advance(by: 21)
        let atBob = try w["bob"].vault.run("receive")
        #expect(atBob.stderr.contains("answered 'alice' about its piece request"), "\(atBob.stderr)")
        #expect(try w["bob"].ok("requests").isEmpty)
        #expect(try w["bob"].ok("secrets", "show", id).contains("alice (index 1)  timed out"))
        let second = try w["alice"].vault.run(["recover", id, "--ttl", "1h"])
        #expect(second.status == 75, "\(second.stderr)")
        #expect(second.stderr.contains("bob: asked through the relays of friends"), "\(second.stderr)")

        // Alice removes carol: carol's requests are refused by the relays, and alice asks
        // her nothing through the group.
        try w["alice"].ok("group", "remove", "friends", "carol")
        let byCarol = try w["carol"].vault.run(["recover", id])
        #expect(byCarol.status != 0)
        #expect(byCarol.stderr.contains("alice: not asked through relays"), "\(byCarol.stderr)")
        let holders = try w["alice"].ok("secrets", "show", id)
        #expect(holders.contains("carol (index 3)"), "\(holders)")
    }
}
