import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import GRDB
import Testing
import VaultCore
import VaultRelayProtocol
import VaultTestSupport

/// Issue 15 against real relay processes on loopback: alice owns a group on three relays
/// with bob, and sends him messages 2 of 3.
final class RelayWorld {
    let directory = TemporaryDirectory("vault-relays")
    var relays: [BackgroundProcess] = []
    var urls: [String] = []
    let alice = User("alice"), bob = User("bob")
    /// More `vault relay serve` options for relay i (1-based), e.g. a small --max-message;
    /// a restart takes them as they are then.
    var relayOptions: [Int: [String]]

    init(relayOptions: [Int: [String]] = [:]) throws {
        self.relayOptions = relayOptions
        for i in 1...3 {
            let relay = try start(i, listen: "127.0.0.1:0")
            let line = relay.log.split(separator: "\n").first { $0.contains("listening on ") } ?? ""
            urls.append(String(line.split(separator: " ").last ?? ""))
            relays.append(relay)
        }
        try alice.initialize("alice")
        try bob.initialize("bob")
        try alice.ok("peer", "add", try bob.card(), "--label", "bob", "--yes")
        try bob.ok("peer", "add", try alice.card(), "--label", "alice", "--yes")
        for (i, url) in urls.enumerated() { try alice.ok("relay", "add", "r\(i + 1)", url, "--yes") }
        try bob.ok("relay", "add", "r1", urls[0], "--yes")
        try alice.ok("group", "create", "team", "--relays", "r1,r2,r3", "--members", "bob")
    }

    deinit { for relay in relays { _ = relay.stop(SIGKILL) } }

    /// Relays sweep at start, then hourly: a test sees expiry on the read path alone,
    /// until it restarts a relay.
    private func start(_ i: Int, listen: String) throws -> BackgroundProcess {
        let relay = try BackgroundProcess(VaultBinary.path, ["relay", "serve", "--listen", listen, "--sweep-interval", "3600",
                                                             "--store", "sqlite:" + directory.file("r\(i).db")] + (relayOptions[i] ?? []),
                                          environment: [:], logPath: directory.file("r\(i)-\(relays.count).log"))
        _ = try relay.waitFor("fingerprint ")
        return relay
    }

    /// Stops relay `i` (1-based) if it runs, and starts it again on its port.
    func restart(_ i: Int) throws {
        _ = relays[i - 1].stop(SIGTERM)
        relays[i - 1] = try start(i, listen: String(urls[i - 1].dropFirst("http://".count)))
    }

    func database(_ i: Int) throws -> DatabaseQueue { try DatabaseQueue(path: directory.file("r\(i).db")) }

    /// The team's group id, in hex.
    func groupID() throws -> String {
        try alice.ok("group", "show", "team").split(separator: "\n").first { $0.hasPrefix("id") }
            .map { String($0.split(separator: " ").last!) } ?? ""
    }

    /// The status of a GET that bob signs himself, to relay `i` (0-based).
    func bobGet(relay i: Int, _ path: String) async throws -> Int {
        let identity = try Keystore.open(home: VaultHome.resolve(explicit: bob.directory.file("home"))).unlock(passphrase: nil)
        let card = try KeyCard(text: try RelayTests().cardOf(urls[i]))
        var request = URLRequest(url: URL(string: urls[i] + path)!)
        for (name, value) in RequestSignature.headers(identity: identity, relay: card.signingKey, method: "GET", path: path, bodyHash: sha256([])) {
            request.setValue(value, forHTTPHeaderField: name)
        }
        return (try await URLSession.shared.data(for: request).1 as! HTTPURLResponse).statusCode
    }
}

@Suite(.serialized) struct RelayTests {
    @Test func twoOfThreeWithOneRelayDown() throws {
        let world = try RelayWorld()
        #expect(try world.bob.ok("group", "list").contains("team") == false)
        #expect(world.relays[2].stop(SIGTERM) == 0)
        let note = "the wifi password is hunter2"
        try world.alice.ok("send", "--group", "team", "--min-relays", "2", "-", stdin: note)
        // s = 3 by default for 3 relays: with one down, the send fails and says why.
        let refused = try world.alice.vault.run(["send", "--group", "team", "-"], stdin: Array("x".utf8))
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("only 2 of the relays stored the message, and 3 must"), "\(refused.stderr)")
        let received = try world.bob.vault.run(["receive"])
        #expect(received.status == 0, "\(received.stderr)")
        #expect(received.stdout.hasPrefix(note), "\(received.stdout)")
        #expect(received.stderr.contains("accepted group 'team'"))
        #expect(received.stderr.contains("received #1 from alice in team"))
        // Received and confirmed: nothing new the second time.
        #expect(try world.bob.vault.run(["receive"]).stderr.contains("no new messages"))
    }

    /// `receive` shows each type as `recover` does: a password ends its line and its fields
    /// go to stderr, a contact's fields come as lines, a key as hex.
    @Test func eachTypeIsShownAsRecoverShowsIt() throws {
        let world = try RelayWorld()
        func roundTrip(_ arguments: [String], stdin: String = "") throws -> ProcessResult {
            try world.alice.ok(["send", "--group", "team"] + arguments, stdin: stdin)
            let received = try world.bob.vault.run(["receive"])
            #expect(received.status == 0, "\(received.stderr)")
            return received
        }
        let password = try roundTrip(["--type", "password", "-", "--username", "ana", "--url", "https://example.org"], stdin: "hunter2\n")
        #expect(password.stdout == "hunter2\n")
        #expect(password.stderr.contains("username: ana\n") && password.stderr.contains("url: https://example.org\n"), "\(password.stderr)")
        let contact = try roundTrip(["--type", "contact", "--contact-name", "Ana Lima", "--phone", "+351 1", "--email", "ana@example.org"])
        #expect(contact.stdout == "name: Ana Lima\nphone: +351 1\nemail: ana@example.org\n")
        let key = try roundTrip(["--type", "key"])
        #expect(key.stdout.count == 65 && key.stdout.dropLast().allSatisfy(\.isHexDigit) && key.stdout.last == "\n", "\(key.stdout)")
    }

    @Test func aRelayThatAltersAShareIsNamedAndTheOthersSuffice() throws {
        let world = try RelayWorld()
        let file = world.alice.directory.file("plan.bin")
        let content = SecureRandom().bytes(200_000)
        try Data(content).write(to: URL(fileURLWithPath: file))
        try world.alice.ok("send", file, "--group", "team")
        try world.database(1).write { db in
            try db.execute(sql: "UPDATE chunks SET bytes = zeroblob(length(bytes)) WHERE n = 1")
        }
        let out = world.bob.directory.file("in")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let received = try world.bob.vault.run(["receive", "--out-dir", out])
        #expect(received.status == 0, "\(received.stderr)")
        #expect(received.stderr.contains("relay r1: it served a damaged or forged share"), "\(received.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: out + "/plan.bin")) == Data(content))
    }

    @Test func aRemovedMemberIsRefused() throws {
        let world = try RelayWorld()
        try world.bob.ok("receive")
        try world.alice.ok("group", "remove", "team", "bob")
        let sent = try world.alice.vault.run(["send", "--group", "team", "-"], stdin: Array("x".utf8))
        #expect(sent.status == 1 && sent.stderr.contains("no other member"), "\(sent.stderr)")
        // The relays hold no message for bob, and refuse him the group's record.
        let received = try world.bob.vault.run(["receive"])
        #expect(received.stderr.contains("no new messages"), "\(received.stderr)")
    }

    /// A signed request made twice: the relay serves it once and refuses the copy; a
    /// request from a stranger's key verifies but finds nothing of the group's.
    @Test func aReplayedRequestIsRefused() async throws {
        let world = try RelayWorld()
        let identity = Identity.generate(label: try Label("mallory")).0
        let card = try KeyCard(text: try cardOf(world.urls[0]))
        let headers = RequestSignature.headers(identity: identity, relay: card.signingKey, method: "GET", path: "/v1/groups", bodyHash: sha256([]))
        var request = URLRequest(url: URL(string: world.urls[0] + "/v1/groups")!)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (first, firstResponse) = try await URLSession.shared.data(for: request)
        #expect((firstResponse as! HTTPURLResponse).statusCode == 200)
        #expect(String(decoding: first, as: UTF8.self) == "{\"groups\":[]}")
        let (second, secondResponse) = try await URLSession.shared.data(for: request)
        #expect((secondResponse as! HTTPURLResponse).statusCode == 401)
        #expect(String(decoding: second, as: UTF8.self).contains("\"code\":\"replayed\""))
    }

    /// The relays lose alice's #1 to bob (as an UNLOGGED table does in a crash): bob
    /// receives #2, sees the gap and asks alice; alice's next receive stores #1 again from
    /// her outbox; bob's next receive has it. Once bob confirmed both, alice's outbox
    /// empties.
    @Test func aSequenceGapIsFilledByAResend() throws {
        let world = try RelayWorld()
        try world.alice.ok("send", "--group", "team", "-", stdin: "first")
        for i in 1...3 { try world.database(i).write { db in try db.execute(sql: "DELETE FROM messages") } }
        try world.alice.ok("send", "--group", "team", "-", stdin: "second")

        let first = try world.bob.vault.run(["receive"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout == "second")
        #expect(first.stderr.contains("from alice in team, never received #1"), "\(first.stderr)")
        #expect(first.stderr.contains("asked alice in team to resend #1"), "\(first.stderr)")
        // Asked once: a second receive reports the gap without asking again.
        let again = try world.bob.vault.run(["receive"])
        #expect(again.stderr.contains("never received #1") && !again.stderr.contains("asked alice"), "\(again.stderr)")

        let answered = try world.alice.vault.run(["receive"])
        #expect(answered.status == 0, "\(answered.stderr)")
        #expect(answered.stderr.contains("resent #1 to bob in team, as asked"), "\(answered.stderr)")

        let filled = try world.bob.vault.run(["receive"])
        #expect(filled.stdout == "first", "\(filled.stderr)")
        #expect(filled.stderr.contains("received #1 from alice in team"), "\(filled.stderr)")
        #expect(!filled.stderr.contains("never received"), "\(filled.stderr)")

        // #2 was confirmed before alice's last receive, which dropped it from her outbox;
        // #1 stays until bob confirmed it too.
        let outbox = world.alice.directory.file("home/relay-outbox")
        #expect(try FileManager.default.contentsOfDirectory(atPath: outbox).count == 1)
        try world.alice.ok("receive")
        #expect(try FileManager.default.contentsOfDirectory(atPath: outbox).isEmpty)
    }

    /// A number alice no longer keeps (its send failed) is answered as such, not resent.
    @Test func aGapThatCannotBeFilledIsSaid() throws {
        let world = try RelayWorld()
        #expect(world.relays[2].stop(SIGTERM) == 0)
        #expect(world.relays[1].stop(SIGTERM) == 0)
        #expect(try world.alice.vault.run(["send", "--group", "team", "-"], stdin: Array("lost".utf8)).status == 1)
        try world.restart(2)
        try world.restart(3)
        try world.alice.ok("send", "--group", "team", "-", stdin: "kept")
        let bob = try world.bob.vault.run(["receive"])
        #expect(bob.stdout == "kept" && bob.stderr.contains("asked alice in team to resend #1"), "\(bob.stderr)")
        let alice = try world.alice.vault.run(["receive"])
        #expect(alice.stderr.contains("bob asked in team for #1, no longer kept here"), "\(alice.stderr)")
    }

    /// A resend that fewer than k relays stored is not a resend: the member could not
    /// rebuild it, so alice says so instead of "resent".
    @Test func aResendFewerThanKRelaysStoredIsNotCalledDone() throws {
        let world = try RelayWorld()
        let file = world.alice.directory.file("big.bin")
        try Data(SecureRandom().bytes(20_000)).write(to: URL(fileURLWithPath: file))
        try world.alice.ok("send", file, "--group", "team")
        for i in 1...3 { try world.database(i).write { db in try db.execute(sql: "DELETE FROM messages") } }
        try world.alice.ok("send", "--group", "team", "-", stdin: "second")
        let bob = try world.bob.vault.run(["receive"])
        #expect(bob.stderr.contains("asked alice in team to resend #1"), "\(bob.stderr)")
        // Relays 2 and 3 now take only small messages: the request, not #1's shares.
        for i in [2, 3] {
            world.relayOptions[i] = ["--max-message", "4096"]
            try world.restart(i)
        }
        let alice = try world.alice.vault.run(["receive"])
        #expect(alice.status == 0, "\(alice.stderr)")
        #expect(alice.stderr.contains("could not resend #1 to bob: only 1 of the 2 relays needed stored it"), "\(alice.stderr)")
        #expect(!alice.stderr.contains("resent #1"), "\(alice.stderr)")
    }

    /// A message past its time to live: never listed nor served, before the sweep (the
    /// relay's clock passes it while its row is still there) and after (the row is gone).
    @Test func aMessagePastItsTTLIsNeverServed() async throws {
        let world = try RelayWorld()
        let id = try world.alice.ok("send", "--group", "team", "--ttl", "2s", "-", stdin: "brief").trimmingCharacters(in: .newlines)
        try await Task.sleep(for: .seconds(3))
        for i in 1...3 {
            let rows = try await world.database(i).read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM messages") }
            #expect(rows == 1, "the sweeper ran before this check could test the read path")
        }
        let before = try world.bob.vault.run(["receive"])
        #expect(before.stdout.isEmpty && before.stderr.contains("no new messages"), "\(before.stderr)")
        let group = try world.groupID()
        for i in 0..<3 { #expect(try await world.bobGet(relay: i, "/v1/groups/\(group)/messages/\(id)") == 404) }
        // The sweep, which a relay runs as it starts.
        for i in 1...3 { try world.restart(i) }
        for i in 1...3 {
            let rows = try await world.database(i).read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM messages") }
            #expect(rows == 0)
        }
        #expect(try world.bob.vault.run(["receive"]).stderr.contains("no new messages"))
    }

    /// A relay that answers with another group's share (here: its store's rows swapped)
    /// is named, and the message is rebuilt from the others.
    @Test func aRelayServingAnotherGroupsShareIsRefused() throws {
        let world = try RelayWorld()
        try world.alice.ok("group", "create", "other", "--relays", "r1,r2,r3", "--members", "bob")
        try world.alice.ok("send", "--group", "other", "-", stdin: "for the other group")
        try world.alice.ok("send", "--group", "team", "-", stdin: "for the team")
        // r1 serves the other group's share (signed by alice, whole) under the team's
        // message: the two rows trade their group and message ids.
        try world.database(1).write { db in
            let rows = try Row.fetchAll(db, sql: "SELECT row, group_id, id FROM messages ORDER BY row")
            let (other, team) = (rows[0], rows[1])
            try db.execute(sql: "UPDATE messages SET id = zeroblob(16) WHERE row = ?", arguments: [other["row"] as Int64])
            try db.execute(sql: "UPDATE messages SET group_id = ?, id = ? WHERE row = ?",
                           arguments: [other["group_id"] as Data, other["id"] as Data, team["row"] as Int64])
            try db.execute(sql: "UPDATE messages SET group_id = ?, id = ? WHERE row = ?",
                           arguments: [team["group_id"] as Data, team["id"] as Data, other["row"] as Int64])
        }
        let received = try world.bob.vault.run(["receive", "--group", "team"])
        #expect(received.status == 0, "\(received.stderr)")
        #expect(received.stdout == "for the team", "\(received.stderr)")
        #expect(received.stderr.contains("relay r1: it served a damaged or forged share: the message share is malformed: it belongs to another group or message"),
                "\(received.stderr)")
    }

    func cardOf(_ url: String) throws -> String {
        let data = try Data(contentsOf: URL(string: url + "/card")!)
        return try JSONDecoder().decode(RelayAPI.Card.self, from: data).card
    }
}
