import Foundation
import GRDB
import Testing
import VaultCore
import VaultRelayProtocol
import VaultTestSupport

/// Issue 37, M4 and M5, and M1: an operator's policy for who owns groups, quotas that
/// hold, links bound per address, and a link's password limit kept in the store, against
/// real relay processes.
@Suite(.serialized) struct RelayPolicyTests {
    /// One relay with `options`, on loopback, SQLite in `directory`.
    static func relay(_ directory: TemporaryDirectory, _ name: String, _ options: [String] = [], store: String? = nil,
                      launcher: ((String, [String]) -> (String, [String]))? = nil, listen: String = "127.0.0.1:0")
        throws -> (BackgroundProcess, String) {
        let arguments = ["relay", "serve", "--listen", listen, "--sweep-interval", "3600",
                         "--store", store ?? "sqlite:" + directory.file("\(name).db")] + options
        let (executable, all) = launcher?(VaultBinary.path, arguments) ?? (VaultBinary.path, arguments)
        let relay = try BackgroundProcess(executable, all, environment: [:], logPath: directory.file("\(name).log"))
        _ = try relay.waitFor("connections  ", timeout: 60)
        let line = relay.log.split(separator: "\n").first { $0.contains("listening on ") } ?? ""
        return (relay, String(line.split(separator: " ").last ?? ""))
    }

    /// M4: a relay whose operator lists its owners takes groups from the cards of
    /// `--owners` and from whoever redeemed an invite, and refuses anyone else in words; an
    /// invite works as many times as it says. A relay on loopback takes anyone's by default.
    @Test func onlyListedOwnersOwnGroups() throws {
        let directory = TemporaryDirectory("vault-policy")
        let alice = try User("alice").initialize("alice"), carol = try User("carol").initialize("carol")
        let dave = try User("dave").initialize("dave")
        let owners = try directory.write("owners", Array("# the operator's friends\n\n\(try alice.card())#alice\n".utf8))
        let (listed, listedURL) = try Self.relay(directory, "listed", ["--group-owners", "listed", "--owners", owners])
        let (open, openURL) = try Self.relay(directory, "open")
        defer { _ = listed.stop(SIGKILL); _ = open.stop(SIGKILL) }
        #expect(listed.log.contains("policy       groups by listed owners only (1 in --owners, and invites)"), "\(listed.log)")
        #expect(open.log.contains("policy       anyone may own groups"), "\(open.log)")
        for user in [alice, carol, dave] {
            try user.ok("relay", "add", "listed", listedURL, "--yes")
            try user.ok("relay", "add", "open", openURL, "--yes")
        }
        try alice.ok("group", "create", "a", "--relays", "listed,open")
        let refused = try carol.vault.run(["group", "create", "c", "--relays", "listed,open"])
        #expect(refused.stderr.contains("relay listed: this relay lets only the owners its operator lists own groups; ask the operator for an invite"),
                "\(refused.stderr)")

        // An invite for one owner: carol redeems it (from standard input), dave cannot.
        let made = try User("operator").vault.run(["relay", "invite", "--store", "sqlite:" + directory.file("listed.db"), "--uses", "1"])
        #expect(made.status == 0, "\(made.stderr)")
        let invite = made.stdout.trimmingCharacters(in: .newlines)
        #expect(invite.hasPrefix("vault-invite-"))
        #expect(try carol.ok("relay", "redeem", "listed", "-", stdin: invite + "\n").isEmpty)
        try carol.ok("group", "create", "c2", "--relays", "listed,open")
        let used = try dave.vault.run(["relay", "redeem", "listed", "-"], stdin: Array((invite + "\n").utf8))
        #expect(used.status != 0 && used.stderr.contains("the invite is not valid here, used up, or expired"), "\(used.stderr)")
        let notAnInvite = try dave.vault.run(["relay", "redeem", "listed", "-"], stdin: Array("hello\n".utf8))
        #expect(notAnInvite.status != 0 && notAnInvite.stderr.contains("that is not an invite"), "\(notAnInvite.stderr)")
        // The store keeps the invite's hash, not the invite.
        let stored = try DatabaseQueue.beside(directory.file("listed.db")).read { db in
            try Data.fetchAll(db, sql: "SELECT hash FROM invites").map { [UInt8]($0) }
        }
        #expect(stored == [sha256(RelayInvite.token(invite)!)])
    }

    /// M4: a relay reachable beyond loopback defaults to listed owners: here one in a network
    /// namespace of the test's own, on 10.231.0.1, refuses a stranger's group.
    @Test func beyondLoopbackTheDefaultIsListedOwners() throws {
        // Both ends kept: deleting one namespace takes the veth pair with it.
        let (inside, other) = try NetworkNamespace.linked()
        defer { withExtendedLifetime(other) {} }
        let directory = TemporaryDirectory("vault-policy")
        let (relay, url) = try Self.relay(directory, "wide", launcher: inside.wrap, listen: "10.231.0.1:0")
        let (second, secondURL) = try Self.relay(directory, "wide2", launcher: inside.wrap, listen: "10.231.0.1:0")
        defer { _ = relay.stop(SIGKILL); _ = second.stop(SIGKILL) }
        #expect(relay.log.contains("policy       groups by listed owners only (0 in --owners, and invites)"), "\(relay.log)")
        let alice = User("alice")
        alice.vault.launcher = inside.wrap
        try alice.initialize("alice")
        try alice.ok("relay", "add", "wide", url, "--yes")
        try alice.ok("relay", "add", "wide2", secondURL, "--yes")
        let refused = try alice.vault.run(["group", "create", "g", "--relays", "wide,wide2"])
        #expect(refused.status != 0, "\(refused.stderr)")
        #expect(refused.stderr.contains("relay wide: this relay lets only the owners its operator lists own groups"), "\(refused.stderr)")
    }

    /// M4: quotas that hold: groups per owner, an owner's bytes across its groups, and the
    /// relay's total; each refusal says which.
    @Test func quotasPerOwnerAndInAllHold() throws {
        let world = try RelayWorld(relayOptions: [1: ["--groups-per-owner", "2", "--owner-quota", "300KiB", "--group-quota", "1GiB"],
                                                  2: ["--total-quota", "200KiB"]])
        try world.alice.ok("group", "create", "second", "--relays", "r1,r2,r3", "--members", "bob")
        #expect(try world.alice.fails("group", "create", "one", "--relays", "r1")
                    .contains("vault: error: invalid group: a group needs 2 to 32 relays, and this one has 1"))
        let third = try world.alice.vault.run(["group", "create", "third", "--relays", "r1,r3"])
        #expect(third.stderr.contains("relay r1: an owner may have at most 2 groups on this relay"), "\(third.stderr)")

        let file = world.alice.directory.file("big.bin")
        try Data(SecureRandom().bytes(240_000)).write(to: URL(fileURLWithPath: file))
        // k = 2 of 3: each share is about 120 KB. Two fit alice's 300 KiB on r1, across her
        // two groups; the third does not. r2's total of 200 KiB takes one.
        try world.alice.ok("send", file, "--group", "team")
        let second = try world.alice.vault.run(["send", file, "--group", "second"])
        #expect(second.stderr.contains("relay r2: the relay holds as much as its operator allows; try again later"), "\(second.stderr)")
        let third2 = try world.alice.vault.run(["send", file, "--group", "second"])
        #expect(third2.stderr.contains("relay r1: the group's owner has used its quota of 300 KiB on this relay"), "\(third2.stderr)")
    }

    /// M5: anonymous links count against their address (by /32 here; IPv6 by /64), live at
    /// most a day, and a relay can make links only for listed cards; a link signed by a
    /// listed card is bound by neither.
    @Test func anonymousLinksAreBoundByAddress() async throws {
        let directory = TemporaryDirectory("vault-policy")
        let alice = try User("alice").initialize("alice")
        let owners = try directory.write("owners", Array((try alice.card() + "\n").utf8))
        let (relay, url) = try Self.relay(directory, "links", ["--links-per-address", "2", "--owners", owners])
        let (strict, strictURL) = try Self.relay(directory, "strict", ["--links", "listed", "--owners", owners])
        defer { _ = relay.stop(SIGKILL); _ = strict.stop(SIGKILL) }
        try alice.ok("relay", "add", "r1", url, "--yes")
        try alice.ok("relay", "add", "strict", strictURL, "--yes")
        for n in 1...2 { try alice.ok("link", "create", "--relay", "r1", "-", stdin: "note \(n)") }
        let third = try alice.vault.run(["link", "create", "--relay", "r1", "-"], stdin: Array("note 3".utf8))
        #expect(third.status != 0 && third.stderr.contains("this address holds as many links as it may here (2 links, 64 MiB)"),
                "\(third.stderr)")
        // Another address has its own allowance.
        let other = try LinkProbe(url: url).create(from: "127.0.0.2", ttl: 3600)
        #expect(other.status == 201, "\(other)")
        // Signed by a listed card: not bound by the address, and kept up to the relay's
        // longest lifetime, where an anonymous link lives a day at most.
        try alice.ok("link", "create", "--relay", "r1", "--signed", "-", stdin: "note 4")
        let week = try alice.vault.run(["link", "create", "--relay", "r1", "--expires", "7d", "-"], stdin: Array("note 5".utf8))
        #expect(week.status != 0 && week.stderr.contains("this relay keeps anonymous links at most 1 day"), "\(week.stderr)")
        try alice.ok("link", "create", "--relay", "r1", "--signed", "--expires", "7d", "-", stdin: "note 6")
        // A relay that makes links only for listed cards.
        let unsigned = try alice.vault.run(["link", "create", "--relay", "strict", "-"], stdin: Array("x".utf8))
        #expect(unsigned.status != 0 && unsigned.stderr.contains("this relay makes links only for cards its operator lists"), "\(unsigned.stderr)")
        try alice.ok("link", "create", "--relay", "strict", "--signed", "-", stdin: "x")
        // A stranger's signature is anonymous.
        let bob = try User("bob").initialize("bob")
        try bob.ok("relay", "add", "strict", strictURL, "--yes")
        let stranger = try bob.vault.run(["link", "create", "--relay", "strict", "--signed", "-"], stdin: Array("y".utf8))
        #expect(stranger.status != 0 && stranger.stderr.contains("this relay makes links only for cards its operator lists"),
                "\(stranger.stderr)")
    }

    /// M1: 300 wrong claims of a password link at once get at most the promised real
    /// comparisons (10, then one every 6 s), the rest 429 before any comparison; the right
    /// password afterwards still opens it, once the allowance is back.
    @Test func aLinksGuessLimitHoldsUnderConcurrentClaims() throws {
        let directory = TemporaryDirectory("vault-policy")
        let (relay, url) = try Self.relay(directory, "claims")
        defer { _ = relay.stop(SIGKILL) }
        let counts = try Self.guess(urls: [url], directory: directory)
        #expect(counts.compared <= counts.allowed, "\(counts)")
        #expect(counts.compared >= 10, "the allowance itself was granted: \(counts)")
        #expect(counts.compared + counts.limited == 300, "\(counts)")
    }

    /// M1 across processes: the allowance lives in PostgreSQL, so two relay processes on one
    /// database grant it once between them.
    @Test func aLinksGuessLimitHoldsAcrossPostgresProcesses() throws {
        let cluster = try PostgresCluster()
        let directory = TemporaryDirectory("vault-policy")
        let (front, frontURL) = try Self.relay(directory, "front", store: cluster.url)
        let (back, backURL) = try Self.relay(directory, "back", store: cluster.url)
        defer { _ = front.stop(SIGKILL); _ = back.stop(SIGKILL) }
        let counts = try Self.guess(urls: [frontURL, backURL], directory: directory)
        #expect(counts.compared <= counts.allowed, "\(counts)")
        #expect(counts.compared >= 10, "\(counts)")
        #expect(counts.compared + counts.limited == 300, "\(counts)")
    }

    /// A password link made through `urls[0]`, then 300 wrong claims at once, spread over
    /// `urls` and over source addresses; the right password at the end.
    static func guess(urls: [String], directory: TemporaryDirectory) throws -> (compared: Int, limited: Int, allowed: Int) {
        let alice = try User("alice").initialize("alice")
        try alice.ok("relay", "add", "r1", urls[0], "--yes")
        let password = try directory.write("password", Array("correct horse battery\n".utf8))
        let link = try alice.ok(["link", "create", "--password-file", password, "-"], stdin: "behind a password").trimmingCharacters(in: .newlines)
        let id = try LinkWorld.id(link)
        let statuses = Locked<[Int: Int]>([:])
        let start = Date()
        DispatchQueue.concurrentPerform(iterations: 300) { i in
            let probe = LinkProbe(url: urls[i % urls.count])
            let body = [UInt8](try! JSONEncoder().encode(LinkAPI.Claim(claim: Base64URL.encode(SecureRandom().bytes(32)))))
            let status = (try? probe.post("/links/\(id)/claim", body: body, from: "127.0.\(1 + i % 8).\(1 + i % 200)").status) ?? -1
            statuses.mutate { $0[status, default: 0] += 1 }
        }
        let elapsed = Date().timeIntervalSince(start)
        let counts = statuses.value
        #expect(Set(counts.keys).isSubset(of: [403, 429]), "\(counts)")
        // Wait out the allowance, then open it with the right password: it was never spent
        // by a view.
        Thread.sleep(forTimeInterval: 7)
        let opened = try User("reader").vault.run(["link", "open", link, "--password-file", password])
        #expect(opened.stdout == "behind a password", "\(opened.stderr)")
        return (counts[403, default: 0], counts[429, default: 0], 10 + Int(elapsed / 6) + 1)
    }
}

/// Plain requests to a relay's link routes, from a chosen loopback address.
struct LinkProbe {
    let url: String
    var port: Int { Int(url.split(separator: ":").last!)! }

    func post(_ target: String, body: [UInt8], headers: [(String, String)] = [], from source: String = "127.0.0.1") throws -> LoopbackHTTP.Answer {
        try LoopbackHTTP(port: port, from: source).exchange(LoopbackHTTP.request("POST", target, headers: headers, body: body))
    }

    /// An anonymous link of a few bytes, as `vault link create` would make one.
    func create(from source: String, ttl: Int) throws -> LoopbackHTTP.Answer {
        let length = Int(LinkStream.blobLength(plaintext: 16))
        let body = LinkStream.header + SecureRandom().bytes(length - LinkStream.header.count)
        return try post("/links", body: body, headers: [
            (LinkAPI.Header.ttl, String(ttl)), (LinkAPI.Header.views, "1"), (LinkAPI.Header.iterations, "0"),
            (LinkAPI.Header.claimHash, Base64URL.encode(SecureRandom().bytes(32))),
            (LinkAPI.Header.deleteHash, Base64URL.encode(SecureRandom().bytes(32))),
        ], from: source)
    }
}
