import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import VaultCore
import VaultRelayProtocol
import VaultTestSupport

/// Issue 15's PostgreSQL store against a real, throwaway cluster: two `vault relay serve`
/// processes share one database and are one relay (one card); beside them, one relay on
/// SQLite, so that alice's group has the two relays it needs.
final class PostgresWorld {
    let cluster: PostgresCluster
    let directory = TemporaryDirectory("vault-pg-relays")
    var front: BackgroundProcess, back: BackgroundProcess, other: BackgroundProcess
    let frontURL: String, backURL: String, otherURL: String
    let alice = User("alice"), bob = User("bob")
    /// The clock of the relays and of alice's and bob's commands.
    let clock = TestClock()

    /// `options`: more `vault relay serve` options for both PostgreSQL processes.
    init(options: [String] = []) throws {
        cluster = try PostgresCluster()
        (front, frontURL) = try Self.relay(["--store", cluster.url] + options, clock: clock, log: directory.file("front.log"))
        (back, backURL) = try Self.relay(["--store", cluster.url] + options, clock: clock, log: directory.file("back.log"))
        (other, otherURL) = try Self.relay(["--store", "sqlite:" + directory.file("other.db")], clock: clock, log: directory.file("other.log"))
        for user in [alice, bob] { user.vault.environment.merge(clock.environment) { $1 } }
        try alice.initialize("alice")
        try bob.initialize("bob")
        try alice.ok("peer", "add", try bob.card(), "--label", "bob", "--yes")
        try bob.ok("peer", "add", try alice.card(), "--label", "alice", "--yes")
        try alice.ok("relay", "add", "pg", frontURL, "--yes")
        try alice.ok("relay", "add", "lite", otherURL, "--yes")
        try bob.ok("relay", "add", "pg", frontURL, "--yes")
        try alice.ok("group", "create", "team", "--relays", "pg,lite", "--members", "bob")
        // bob opts in at both relays, as his first receive would (issue 37).
        let group = try alice.ok("group", "show", "team").split(separator: "\n").first { $0.hasPrefix("id") }
            .map { String($0.split(separator: " ").last!) } ?? ""
        try bob.acceptGroup(group, of: alice, at: [frontURL, otherURL])
    }

    deinit { for relay in [front, back, other] { relay.stop(SIGKILL) } }

    /// A relay sweeping every second, and its URL.
    private static func relay(_ store: [String], clock: TestClock, log: String) throws -> (BackgroundProcess, String) {
        let relay = try BackgroundProcess(VaultBinary.path, ["relay", "serve", "--listen", "127.0.0.1:0", "--sweep-interval", "1"] + store,
                                          environment: clock.environment, logPath: log)
        try relay.waitFor("fingerprint ", timeout: 60)
        let line = relay.log.split(separator: "\n").first { $0.contains("listening on ") } ?? ""
        return (relay, String(line.split(separator: " ").last ?? ""))
    }

    /// A GET that bob signs, to the relay at `url`: its status, body and headers.
    func bobGet(_ url: String, _ path: String, headers given: [(String, String)]? = nil) async throws -> (Int, Data, [(String, String)]) {
        let identity = try Keystore.open(home: VaultHome.resolve(explicit: bob.directory.file("home"))).unlock(passphrase: nil)
        let card = try JSONDecoder().decode(RelayAPI.Card.self, from: try Data(contentsOf: URL(string: url + "/card")!)).card
        let headers = try given ?? RequestSignature.headers(identity: identity, relay: KeyCard(text: card).signingKey, method: "GET",
                                                            path: path, bodyHash: sha256([]))
        var request = URLRequest(url: URL(string: url + path)!)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (body, response) = try await URLSession.shared.data(for: request)
        return ((response as! HTTPURLResponse).statusCode, body, headers)
    }
}

@Suite(.serialized) struct PostgresRelayTests {
    /// A share stored through one process is listed and served by the other, and a nonce
    /// seen by one is refused by the other; bob's receive through the first confirms, and
    /// the second then lists nothing.
    @Test func twoProcessesAreOneRelay() async throws {
        let world = try PostgresWorld()
        let frontCard = try world.alice.ok("relay", "check", "pg")
        #expect(frontCard.hasPrefix("pg\tok\t"), "\(frontCard)")
        let id = try world.alice.ok("send", "--group", "team", "-", stdin: "through postgres").trimmingCharacters(in: .newlines)
        #expect(try world.cluster.sql("SELECT count(*) FROM relay_messages WHERE ready = 1") == "1")
        // UNLOGGED: no WAL for what expires.
        #expect(try world.cluster.sql("SELECT relpersistence FROM pg_class WHERE relname = 'relay_chunks'") == "u")

        let (status, list, headers) = try await world.bobGet(world.backURL, "/v1/messages")
        #expect(status == 200)
        #expect(String(decoding: list, as: UTF8.self).contains(id))
        let group = try JSONDecoder().decode(RelayAPI.Messages.self, from: list).messages[0].group
        let (shareStatus, share, _) = try await world.bobGet(world.backURL, "/v1/groups/\(group)/messages/\(id)")
        #expect(shareStatus == 200 && share.count > 100)
        // The same signed request again, now to the other process: one nonce memory.
        #expect(try await world.bobGet(world.frontURL, "/v1/messages", headers: headers).0 == 401)

        let received = try world.bob.vault.run(["receive"])
        #expect(received.stdout == "through postgres", "\(received.stderr)")
        let (_, after, _) = try await world.bobGet(world.backURL, "/v1/messages")
        #expect(try JSONDecoder().decode(RelayAPI.Messages.self, from: after).messages.isEmpty)
    }

    /// Past its TTL a message is served by neither process, and the sweepers (both running,
    /// every second) delete its rows.
    @Test func expiryHoldsWithBothRunning() async throws {
        let world = try PostgresWorld()
        // Made during the send, it has expired once the relays' clock is 13 s on; the
        // sweepers (each every second) then take it.
        let id = try world.alice.ok("send", "--group", "team", "--ttl", "12s", "-", stdin: "brief").trimmingCharacters(in: .newlines)
        #expect(try world.cluster.sql("SELECT count(*) FROM relay_messages") == "1")
        world.clock.advance(by: 13)
        for url in [world.frontURL, world.backURL] {
            let (_, list, _) = try await world.bobGet(url, "/v1/messages")
            #expect(!String(decoding: list, as: UTF8.self).contains(id))
        }
        #expect(try eventually(within: 5) {
            try world.cluster.sql("SELECT (SELECT count(*) FROM relay_messages) + (SELECT count(*) FROM relay_chunks)") == "0"
        })
        #expect(try world.bob.vault.run(["receive"]).stderr.contains("no new messages"))
        // Both still up.
        #expect(try await world.bobGet(world.frontURL, "/v1/groups").0 == 200)
        #expect(try await world.bobGet(world.backURL, "/v1/groups").0 == 200)
    }

    /// Issue 37's quotas in PostgreSQL, where one call checks and counts them under one lock
    /// across processes: alice's 300 KiB as an owner takes two shares of 120 KB and refuses
    /// a third; what the relay counts is what it holds, before and after bob confirms a
    /// message sent delete-when-read.
    @Test func quotasAreCheckedAndCountedInTheDatabase() throws {
        let world = try PostgresWorld(options: ["--owner-quota", "300KiB"])
        let file = world.alice.directory.file("big.bin")
        try Data(SecureRandom().bytes(240_000)).write(to: URL(fileURLWithPath: file))
        // k = 2 of the 2 relays: a share is about 120 KB, streamed (begin, chunks, finish).
        try world.alice.ok("send", file, "--group", "team")
        try world.alice.ok("send", file, "--group", "team")
        let third = try world.alice.vault.run(["send", file, "--group", "team"])
        #expect(third.stderr.contains("relay pg: the group's owner has used its quota of 300 KiB on this relay"), "\(third.stderr)")
        // A note: stored whole, in one call.
        try world.alice.ok("send", "--group", "team", "--delete-when-read", "-", stdin: "small")
        #expect(try world.cluster.sql("SELECT count(*) FROM relay_messages WHERE ready = 1") == "3")
        #expect(try world.cluster.sql("SELECT count(DISTINCT finished) FROM relay_messages") == "3")
        let held = """
            (SELECT COALESCE(SUM(size), 0) FROM relay_messages WHERE ready < 2) + (SELECT SUM(length(record)) FROM relay_groups)
            """
        let total = "SELECT bytes FROM relay_usage WHERE scope = ''::BYTEA"
        #expect(try world.cluster.sql("SELECT (\(total)) = \(held) AND \(held) > 240000") == "t")
        #expect(try world.cluster.sql("SELECT bytes FROM relay_usage WHERE scope = (SELECT owner FROM relay_groups)")
                == world.cluster.sql(total))
        // Read and confirmed by bob: the note, sent delete-when-read, is deleted and no longer
        // counted; the others stay, counted.
        let before = try world.cluster.sql(total)
        let out = world.bob.directory.file("in")
        try world.bob.ok("receive", "--out-dir", out)
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).count == 3)
        #expect(try world.cluster.sql("SELECT count(*) FROM relay_messages WHERE ready = 1") == "2")
        #expect(try world.cluster.sql("SELECT (\(total)) = \(held) AND (\(total)) < \(before)") == "t")
    }

    /// Issue 32: a store that cannot be reached or logged into is said at start, in words
    /// naming what failed, instead of a relay that prints nothing and hangs: a port where
    /// nothing listens (refused), a port that takes the connection and never speaks (timed
    /// out, after connect_timeout), a role that does not exist, a database that does not.
    @Test func aStoreThatCannotBeUsedIsNamedAtStart() throws {
        let cluster = try PostgresCluster()
        let directory = TemporaryDirectory("vault-pg-wrong")
        // Accepts TCP connections (the kernel completes them in the backlog) and never answers.
        let silent = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(silent) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(silent, $0, length) == 0 && getsockname(silent, $0, &length) == 0 && listen(silent, 8) == 0
            }
        }
        #expect(listening)
        let silentPort = Int(UInt16(bigEndian: address.sin_port))
        // A port nothing listens on: bound, read and let go.
        let closedPort = try freeLoopbackPort()

        let cases: [(store: String, says: String)] = [
            ("postgres://vault@127.0.0.1:\(closedPort)/postgres",
             "cannot connect to PostgreSQL at 127.0.0.1:\(closedPort): the connection was refused (is it running, and on that port?)"),
            ("postgres://vault@127.0.0.1:\(silentPort)/postgres?connect_timeout=1",
             "cannot connect to PostgreSQL at 127.0.0.1:\(silentPort): it did not answer within 1 s"),
            ("postgres://mallory@127.0.0.1:\(cluster.port)/postgres",
             "PostgreSQL at 127.0.0.1:\(cluster.port) refused user 'mallory': role \"mallory\" does not exist"),
            ("postgres://vault@127.0.0.1:\(cluster.port)/nosuchdb",
             "PostgreSQL at 127.0.0.1:\(cluster.port) has no database 'nosuchdb'"),
        ]
        for (i, wrong) in cases.enumerated() {
            let started = Date()
            let relay = try BackgroundProcess(VaultBinary.path, ["relay", "serve", "--listen", "127.0.0.1:0", "--store", wrong.store],
                                              environment: [:], logPath: directory.file("\(i).log"))
            // A relay that hangs is killed after 20 s, and the check below then fails.
            let watchdog = DispatchWorkItem { _ = kill(relay.pid, SIGKILL) }
            DispatchQueue.global().asyncAfter(deadline: .now() + 20, execute: watchdog)
            let status = relay.wait()
            watchdog.cancel()
            #expect(status == 1, "\(wrong.store): status \(status), \(relay.log)")
            #expect(relay.log.contains("vault: error: " + wrong.says), "\(relay.log)")
            #expect(!relay.log.contains("listening on"), "\(relay.log)")
            #expect(Date().timeIntervalSince(started) < 15, "\(wrong.store) took \(Date().timeIntervalSince(started)) s")
        }
    }

    private func freeLoopbackPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Issue 33 on PostgreSQL: a list waiting on one process is answered as soon as a
    /// message for its caller is stored through the other (NOTIFY, LISTEN). A message shown
    /// behind the relays' backs (no notification) wakes nobody, until the processes'
    /// listening connections are cut: each listens again and has its waiters look again, and
    /// then hears the next message as before.
    @Test func aWaitingListOnOneProcessIsWokenThroughTheOther() throws {
        let world = try PostgresWorld()
        let back = try WaitingRelay(world.backURL)
        let bob = try signingIdentity(of: world.bob)
        let waiting = try back.ask(bob, "/v1/messages?wait=30")
        Thread.sleep(forTimeInterval: 1)
        #expect(waiting.elapsed == nil)
        let id = try world.alice.ok("send", "--group", "team", "-", stdin: "through the front").trimmingCharacters(in: .newlines)
        let sent = PendingAnswer.now
        let answer = try waiting.answer(within: 40)
        #expect(answer.status == 200 && answer.text.contains(id), "\(answer)")
        #expect(waiting.answered(after: sent)! < 10 && waiting.elapsed! < 29, "answered \(waiting.answered(after: sent)!) s after the send")
        let last = try #require(try JSONDecoder().decode(RelayAPI.Messages.self, from: Data(answer.body)).last)

        _ = try world.cluster.sql("UPDATE relay_messages SET ready = 0")
        let hidden = try back.ask(bob, "/v1/messages?wait=30")
        Thread.sleep(forTimeInterval: 1)
        _ = try world.cluster.sql("UPDATE relay_messages SET ready = 1")
        Thread.sleep(forTimeInterval: 1.5)
        #expect(hidden.elapsed == nil, "answered with no notification: \(String(describing: hidden.result))")
        let listening = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'"
        #expect(try world.cluster.sql(listening) == "2")
        #expect(try world.cluster.sql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'") == "2")
        let cut = PendingAnswer.now
        #expect(try hidden.answer(within: 40).text.contains(id))
        // Before the wait's own end too, where it would list the message anyway.
        #expect(hidden.answered(after: cut)! < 15 && hidden.elapsed! < 29, "answered \(hidden.answered(after: cut)!) s after the cut, \(hidden.elapsed!) s into its wait")

        #expect(try eventually(within: 10) { try world.cluster.sql(listening) == "2" })
        let next = try back.ask(bob, "/v1/messages?after=\(last)&wait=30")
        Thread.sleep(forTimeInterval: 1)
        #expect(next.elapsed == nil)
        let second = try world.alice.ok("send", "--group", "team", "-", stdin: "again").trimmingCharacters(in: .newlines)
        let again = PendingAnswer.now
        #expect(try next.answer(within: 40).text.contains(second))
        #expect(next.answered(after: again)! < 10 && next.elapsed! < 29, "answered \(next.answered(after: again)!) s after the send")
    }

    /// Issue 16 on PostgreSQL: fifty claims of a one-view link, split between two relay
    /// processes on one database, give exactly one success; the row is gone after it.
    @Test func concurrentClaimsAcrossTwoProcessesGiveOneSuccess() async throws {
        let cluster = try PostgresCluster()
        let world = try LinkWorld(store: cluster.url)
        let directory = TemporaryDirectory("vault-pg-links")
        let second = try BackgroundProcess(VaultBinary.path, ["relay", "serve", "--listen", "127.0.0.1:0", "--store", cluster.url],
                                           environment: [:], logPath: directory.file("second.log"))
        defer { second.stop(SIGKILL) }
        try second.waitFor("fingerprint ", timeout: 60)
        let line = second.log.split(separator: "\n").first { $0.contains("listening on ") } ?? ""
        try await LinkTests.race(world, urls: [world.url, String(line.split(separator: " ").last ?? "")])
        // The row goes once the one view is served, which ends just after the reader has it.
        #expect(try eventually(within: 5) {
            try cluster.sql("SELECT (SELECT count(*) FROM relay_links) + (SELECT count(*) FROM relay_link_chunks)") == "0"
        })
    }

    /// A list's work is bounded by what waits for the caller, whatever the planner believes.
    /// The statistics of a busy relay lag its newest groups: the bench's second group
    /// (`vault-bench --relay`, 200 members, 4,000 messages) was planned as one member and one
    /// message, and each list scanned every message of the group once for each member (46 s
    /// a list). Here the statistics are taken before a group of 5,000 messages arrives, 50 of
    /// them for bob, and bob lists it ten times: the relay must fetch his 50 messages a list,
    /// not the group's 5,000 for each of them.
    @Test func aListFetchesOnlyWhatWaitsForTheCaller() async throws {
        // No sweeps while it counts: a sweep reads the table too (by its expiry, or whole).
        let world = try PostgresWorld(options: ["--sweep-interval", "3600"])
        let bob = try Keystore.open(home: VaultHome.resolve(explicit: world.bob.directory.file("home"))).unlock(passphrase: nil)
        let key = "'\\x\(bob.card.signingKey.hex)'::BYTEA"
        let (old, new) = ("'\\x" + String(repeating: "aa", count: 16) + "'::BYTEA", "'\\x" + String(repeating: "bb", count: 16) + "'::BYTEA")
        func group(_ id: String, members: Int, messages: Int, forBob: Int) throws {
            _ = try world.cluster.sql("INSERT INTO relay_groups VALUES (\(id), 1, '\\x01', '\\x00')")
            _ = try world.cluster.sql("""
                INSERT INTO relay_members SELECT \(id), sha256(int4send(i) || \(id)) FROM generate_series(1, \(members)) i
                UNION ALL SELECT \(id), \(key)
                """)
            _ = try world.cluster.sql("INSERT INTO relay_acceptances (group_id, signing_key, accepted) SELECT group_id, signing_key, TRUE FROM relay_members WHERE group_id = \(id)")
            _ = try world.cluster.sql("""
                INSERT INTO relay_messages (group_id, id, sender, size, expires, delete_when_confirmed, body_hash, ready, created, finished)
                SELECT \(id), sha256(int4send(i)), \(key), 10, 4000000000, FALSE, sha256(''::BYTEA), 1, 0, nextval('relay_finished')
                FROM generate_series(1, \(messages)) i
                """)
            _ = try world.cluster.sql("""
                INSERT INTO relay_recipients (message, signing_key)
                SELECT row, CASE WHEN \(forBob) > 0 AND row % \(messages / max(forBob, 1)) = 0 THEN \(key) ELSE sha256(int8send(row)) END FROM relay_messages WHERE group_id = \(id)
                """)
        }
        try group(old, members: 3, messages: 20, forBob: 0)
        _ = try world.cluster.sql("ANALYZE")
        // The statistics stay as taken: autovacuum, which would analyze the new group's rows,
        // is off for these tables (the bench's relay met the lists before it came).
        for table in ["relay_groups", "relay_members", "relay_acceptances", "relay_messages", "relay_recipients"] {
            _ = try world.cluster.sql("ALTER TABLE \(table) SET (autovacuum_enabled = off)")
        }
        try group(new, members: 100, messages: 5000, forBob: 50)
        func fetched() throws -> Int {
            Int(try world.cluster.sql("SELECT COALESCE(idx_tup_fetch, 0) + seq_tup_read FROM pg_stat_user_tables WHERE relname = 'relay_messages'")) ?? -1
        }
        let before = try fetched()
        for _ in 0..<10 {
            let (status, body, _) = try await world.bobGet(world.frontURL, "/v1/messages?group=" + String(repeating: "bb", count: 16))
            #expect(status == 200)
            #expect(try JSONDecoder().decode(RelayAPI.Messages.self, from: body).messages.count == 50)
        }
        // A server process reports what it read when it goes idle, or at the latest when it
        // ends, as it does once its client is gone: the relays are killed, and the count
        // read once it has settled (the same three times running, for at most 20 s).
        for relay in [world.front, world.back] { _ = relay.stop(SIGKILL) }
        var after = try fetched(), settled = 0
        for _ in 0..<40 where settled < 3 {
            try await Task.sleep(for: .milliseconds(500))
            let now = try fetched()
            settled = now == after ? settled + 1 : 0
            after = now
        }
        #expect(settled == 3, "the count did not settle")
        #expect(after - before <= 10 * 50 + 100, "relay_messages rows fetched for ten lists: \(after - before)")
    }
}
