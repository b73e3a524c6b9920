import Foundation
import GRDB
import Testing
import VaultCore
import VaultRelayProtocol
import VaultTestSupport

/// Issue 15's bad input against real relay processes on loopback (RelayWorld): oversize
/// bodies, malformed bodies and queries, wrong signatures, clock skew, unknown groups, and a
/// flood of bogus requests. Each gets its HTTP status and JSON code; the relay stays up with
/// bounded memory, and nothing of it is stored (the SQLite file's rows are counted before and
/// after). The API has no JSON request bodies (group records and message shares travel as
/// octets), so "malformed" is covered with malformed binary bodies and query parameters.
@Suite(.serialized) struct RelayAbuseTests {
    /// A share above a relay's --max-message is refused with 413 whether its length is
    /// declared (Content-Length, refused before the body is read) or only found in the
    /// share's header (chunked), and a group record over GroupRecord.maximumLength too; the
    /// relay keeps none of it.
    @Test func oversizeBodiesAreRefusedAndNothingStored() throws {
        let world = try RelayWorld(relayOptions: [1: ["--max-message", "16384"]])
        let r1 = try Hand(world, relay: 1), r2 = try Hand(world, relay: 2)
        let alice = try world.identity(world.alice)
        let team = try world.groupID()

        // Under the limit, r1 stores a share: the limit is not refusing everything.
        try world.alice.ok("send", "--group", "team", "-", stdin: "fits")
        #expect(try world.counts(1)["messages"] == 1)
        // A 300 KB file: r1 refuses its share (through the client, which says so), r2 and r3
        // store theirs.
        let file = world.alice.directory.file("big.bin")
        try Data(SecureRandom().bytes(300_000)).write(to: URL(fileURLWithPath: file))
        let sent = try world.alice.vault.run(["send", file, "--group", "team", "--min-relays", "2"])
        #expect(sent.status == 0 && sent.stderr.contains("relay r1: a message share is at most 16 KiB on this relay"), "\(sent.stderr)")
        let before = try world.counts(1)
        #expect(before["messages"] == 1 && before["groups"] == 1, "\(before)")
        #expect(try world.counts(2)["messages"] == 2)

        // Declared: 100 MB by Content-Length, and not one byte of it sent. The answer comes
        // at once, so the relay did not wait for (or read) the body.
        let declared = try r1.ask(as: alice, "PUT", "/v1/groups/\(team)/messages/\(randomID())", framing: .declared(100_000_000))
        #expect(declared.status == 413 && declared.code == "too_large", "\(declared)")

        // Found in the header: r2's share of the big file, chunked, so no length is declared;
        // its header says 150 KB or so, over r1's 16 KiB.
        let share = try world.storedShare(2, largest: true)
        #expect(share.bytes.count > 16384)
        let chunked = try r1.ask(as: alice, "PUT", "/v1/groups/\(share.group)/messages/\(share.id)", body: share.bytes,
                                 framing: .chunked(4096))
        #expect(chunked.status == 413 && chunked.code == "too_large", "\(chunked)")

        // A group record one byte over the longest a record can be, signed and hashed right.
        let record = SecureRandom().bytes(GroupRecord.maximumLength + 1)
        let group = try r1.ask(as: alice, "PUT", "/v1/groups/\(team)", body: record)
        #expect(group.status == 413 && group.code == "too_large", "\(group)")
        let newGroup = try r2.ask(as: alice, "PUT", "/v1/groups/\(randomID())", body: record, framing: .chunked(65536))
        #expect(newGroup.status == 413 && newGroup.code == "too_large", "\(newGroup)")

        // A header of 100 KB: refused by the HTTP parser (a bare 400, its connection closed),
        // before the relay's code sees it.
        let header = try r1.ask("GET", "/v1/groups", headers: [(RelayHeader.key, String(repeating: "A", count: 100_000))])
        #expect(header.status == 400 && header.closed, "\(header)")

        // Nothing kept but the nonces of the three requests to r1 whose signatures verified.
        var expected = before
        expected["nonces"]! += 3
        #expect(try world.counts(1) == expected)
        #expect(try world.counts(2)["groups"] == 1)
        #expect(try world.groupVersions(1) == world.groupVersions(2))
    }

    /// Bodies that are not what their route takes, each signed and hashed right: a group
    /// record that is noise, a share that is noise, a real share with a flipped last byte,
    /// cut short, or with bytes after its end (after the relay stored 64 KiB rows of it),
    /// and list queries out of range. All 400 `malformed`; no row stays. The same share
    /// whole is then stored, so the refusals were about the damage.
    @Test func malformedBodiesAndQueriesAreRefusedAndNothingStored() throws {
        let world = try RelayWorld()
        let r2 = try Hand(world, relay: 2)
        let alice = try world.identity(world.alice), bob = try world.identity(world.bob)
        let team = try world.groupID()
        let file = world.alice.directory.file("big.bin")
        try Data(SecureRandom().bytes(300_000)).write(to: URL(fileURLWithPath: file))
        try world.alice.ok("send", file, "--group", "team")
        let share = try world.storedShare(2)
        #expect(share.bytes.count > 2 * 65536, "the share should span rows, so a refusal at its end has rows to drop")
        try world.database(2).write { db in try db.execute(sql: "DELETE FROM messages") }
        let before = try world.counts(2)
        #expect(before["messages"] == 0 && before["chunks"] == 0 && before["groups"] == 1, "\(before)")
        let versions = try world.groupVersions(2)
        var signed = 0

        func refused(_ answer: LoopbackHTTP.Answer, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
            signed += 1
            #expect(answer.status == 400 && answer.code == "malformed", "\(what): \(answer)", sourceLocation: sourceLocation)
        }
        refused(try r2.ask(as: alice, "PUT", "/v1/groups/\(team)", body: SecureRandom().bytes(700)), "a noise group record")
        refused(try r2.ask(as: alice, "PUT", "/v1/groups/\(team)", body: Array("VLTG".utf8) + SecureRandom().bytes(300)),
                "a group record with its magic and noise after")
        let target = "/v1/groups/\(share.group)/messages/\(share.id)"
        refused(try r2.ask(as: alice, "PUT", "/v1/groups/\(team)/messages/\(randomID())", body: SecureRandom().bytes(1000)),
                "a noise share")
        var flipped = share.bytes
        flipped[flipped.count - 1] ^= 1
        refused(try r2.ask(as: alice, "PUT", target, body: flipped), "a share with its last byte flipped")
        refused(try r2.ask(as: alice, "PUT", target, body: Array(share.bytes.dropLast(1000))), "a share cut short")
        refused(try r2.ask(as: alice, "PUT", target, body: share.bytes + [0]), "a share with a byte after its end")
        refused(try r2.ask(as: alice, "PUT", target, body: flipped, framing: .chunked(10000)), "a flipped share, chunked")
        for query in ["limit=abc", "limit=0", "limit=501", "limit=-1", "limit=1e3", "after=-1", "after=x", "after=99999999999999999999"] {
            refused(try r2.ask(as: bob, "GET", "/v1/messages?\(query)"), query)
        }
        // Not HTTP at all: the HTTP parser's bare 400.
        let noise = try LoopbackHTTP(port: r2.port).exchange(Array("\u{0}\u{1}noise\r\n\r\n".utf8))
        #expect(noise.status == 400 && noise.closed, "\(noise)")
        var expected = before
        expected["nonces"]! += signed
        #expect(try world.counts(2) == expected)
        #expect(try world.groupVersions(2) == versions)

        // The same requests made right are served.
        let listed = try r2.ask(as: bob, "GET", "/v1/messages?limit=500&after=0")
        #expect(listed.status == 200 && listed.text == "{\"messages\":[]}", "\(listed)")
        let stored = try r2.ask(as: alice, "PUT", target, body: share.bytes, framing: .chunked(10000))
        #expect(stored.status == 201, "\(stored)")
        #expect(try world.counts(2)["messages"] == 1)
        #expect(try world.storedShare(2).bytes == share.bytes)
    }

    /// Requests whose signature does not hold: a flipped bit, another key's signature, one
    /// made for another relay, path or method. 401 `bad_signature`; a missing header is 401
    /// `unsigned`, a header that is not canonical base64url of its length 400 `malformed`. A
    /// body other than the one signed is 400 `body_mismatch`, in words that name the header,
    /// not the signature, which held (issue 37: it was refused "with words about the
    /// signature"). Only requests whose signature verified spend a nonce, and none stores
    /// anything else.
    @Test func wrongSignaturesAreRefused() throws {
        let world = try RelayWorld()
        let r1 = try Hand(world, relay: 1), r2 = try Hand(world, relay: 2)
        let bob = try world.identity(world.bob), alice = try world.identity(world.alice)
        let mallory = Identity.generate(label: try Label("mallory")).0
        let team = try world.groupID()
        let file = world.alice.directory.file("big.bin")
        try Data(SecureRandom().bytes(100_000)).write(to: URL(fileURLWithPath: file))
        try world.alice.ok("send", file, "--group", "team")
        let share = try world.storedShare(1)
        try world.database(1).write { db in try db.execute(sql: "DELETE FROM messages") }
        let record = try world.groupRecord(1)
        let before = try world.counts(1)
        let versions = try world.groupVersions(1)

        func badSignature(_ what: String, _ headers: [(String, String)], _ method: String = "GET", _ target: String = "/v1/groups",
                          sourceLocation: SourceLocation = #_sourceLocation) throws {
            let answer = try r1.ask(method, target, headers: headers)
            #expect(answer.status == 401 && answer.code == "bad_signature", "\(what): \(answer)", sourceLocation: sourceLocation)
        }
        let headers = r1.signed(bob, "GET", "/v1/groups")
        let signature = Base64URL.decode(headers.value(RelayHeader.signature)!)!
        for bit in [0, 255, 511] {
            var bad = signature
            bad[bit / 8] ^= 1 << (bit % 8)
            try badSignature("bit \(bit) of the signature flipped", headers.setting(RelayHeader.signature, Base64URL.encode(bad)))
        }
        try badSignature("signed by mallory, keyed as bob",
                         r1.signed(mallory, "GET", "/v1/groups").setting(RelayHeader.key, Base64URL.encode(bob.card.signingKey)))
        try badSignature("signed for r2", r2.signed(bob, "GET", "/v1/groups"))
        try badSignature("signed for another path", r1.signed(bob, "GET", "/v1/messages"))
        try badSignature("signed for another query", r1.signed(bob, "GET", "/v1/messages?limit=1"), "GET", "/v1/messages?limit=2")
        try badSignature("signed for another method", r1.signed(bob, "PUT", "/v1/groups/\(team)"), "GET", "/v1/groups/\(team)")
        try badSignature("its time changed by a second",
                         headers.setting(RelayHeader.time, String(UInt64(headers.value(RelayHeader.time)!)! - 1)))
        try badSignature("another nonce", headers.setting(RelayHeader.nonce, Base64URL.encode(SecureRandom().bytes(16))))
        try badSignature("another body hash", headers.setting(RelayHeader.bodyHash, Base64URL.encode(sha256([1]))))
        // Signed right over a hash the body does not have: the signature verifies (a nonce
        // is spent), the body does not.
        var spent = 0
        for (method, target, body) in [("PUT", "/v1/groups/\(team)", record),
                                       ("PUT", "/v1/groups/\(share.group)/messages/\(share.id)", share.bytes)] {
            let answer = try r1.ask(method, target, headers: r1.signed(alice, method, target, body: body, hash: sha256(body + [0])), body: body)
            #expect(answer.status == 400 && answer.code == "body_mismatch", "\(target) with another body: \(answer)")
            #expect(answer.text.contains("the body does not match its Vault-Body-SHA256 header"), "\(answer)")
            spent += 1
        }

        for name in [RelayHeader.key, RelayHeader.time, RelayHeader.nonce, RelayHeader.bodyHash, RelayHeader.signature] {
            let answer = try r1.ask("GET", "/v1/groups", headers: headers.filter { $0.0 != name })
            #expect(answer.status == 401 && answer.code == "unsigned", "without \(name): \(answer)")
        }
        let none = try r1.ask("GET", "/v1/groups")
        #expect(none.status == 401 && none.code == "unsigned", "\(none)")
        let key = headers.value(RelayHeader.key)!
        for (name, value) in [(RelayHeader.key, key + "="), (RelayHeader.key, String(key.dropLast())), (RelayHeader.key, "a+b/" + String(key.dropFirst(4))),
                              (RelayHeader.signature, headers.value(RelayHeader.signature)! + "AA"), (RelayHeader.nonce, "")] {
            let answer = try r1.ask("GET", "/v1/groups", headers: headers.setting(name, value))
            #expect(answer.status == 400 && answer.code == "malformed", "\(name): \(value): \(answer)")
        }

        var expected = before
        expected["nonces"]! += spent
        #expect(try world.counts(1) == expected)
        #expect(try world.groupVersions(1) == versions)
        // The untouched headers were never spent: they are served now, once.
        let good = try r1.ask("GET", "/v1/groups", headers: headers)
        #expect(good.status == 200 && good.text.contains(team), "\(good)")
        let again = try r1.ask("GET", "/v1/groups", headers: headers)
        #expect(again.status == 401 && again.code == "replayed", "\(again)")
    }

    /// Vault-Time ten minutes off either way is 401 `clock_skew`, and one that is not a
    /// time is 401 `unsigned`. A skewed request spends no nonce: its nonce is served later in
    /// a request within the window (four minutes off either way, also served).
    @Test func clockSkewIsRefused() throws {
        let world = try RelayWorld()
        let r1 = try Hand(world, relay: 1)
        let bob = try world.identity(world.bob)
        let before = try world.counts(1)
        let now = UInt64(Date().timeIntervalSince1970)
        var nonces: [[UInt8]] = []
        // And times 2^63 seconds from now, the second before and after too: their
        // distance from the relay's clock does not fit in an Int64.
        let far = (-2...2).map { now &+ UInt64(bitPattern: Int64($0)) &+ (1 << 63) }
        for time in [now - 600, now + 600, now - 3600 * 24 * 365, 0, UInt64.max, UInt64(Int64.max) + 1] + far {
            let nonce = SecureRandom().bytes(16)
            nonces.append(nonce)
            let answer = try r1.ask("GET", "/v1/groups", headers: r1.signed(bob, "GET", "/v1/groups", time: time, nonce: nonce))
            #expect(answer.status == 401 && answer.code == "clock_skew", "Vault-Time \(time), now \(now): \(answer)")
        }
        let signed = r1.signed(bob, "GET", "/v1/groups")
        for text in ["abc", "-5", "", "\(now).0", "0x10", "1" + String(repeating: "0", count: 20)] {
            let answer = try r1.ask("GET", "/v1/groups", headers: signed.setting(RelayHeader.time, text))
            #expect(answer.status == 401 && answer.code == "unsigned", "Vault-Time '\(text)': \(answer)")
        }
        #expect(try world.counts(1) == before)
        for (time, nonce) in zip([now - 240, now + 240], nonces) {
            let answer = try r1.ask("GET", "/v1/groups", headers: r1.signed(bob, "GET", "/v1/groups", time: time, nonce: nonce))
            #expect(answer.status == 200, "Vault-Time \(time), now \(now): \(answer)")
        }
        var expected = before
        expected["nonces"]! += 2
        #expect(try world.counts(1) == expected)
    }

    /// A group the relay does not have: 404 `unknown_group` to read it or store a message in
    /// it, 404 `not_found` for a message in it; a record for another group than its path is
    /// 400. An id that is not 32 lowercase hex digits is 400 `malformed`. A stranger gets
    /// 403 for a group that exists. Nothing is stored.
    @Test func unknownGroupsAndBadIdsAreRefused() throws {
        let world = try RelayWorld()
        let r1 = try Hand(world, relay: 1)
        let alice = try world.identity(world.alice), bob = try world.identity(world.bob)
        let mallory = Identity.generate(label: try Label("mallory")).0
        let team = try world.groupID()
        let record = try world.groupRecord(1)
        let before = try world.counts(1)
        let versions = try world.groupVersions(1)
        var signed = 0

        func check(_ answer: LoopbackHTTP.Answer, _ status: Int, _ code: String, _ what: String,
                    sourceLocation: SourceLocation = #_sourceLocation) {
            signed += 1
            #expect(answer.status == status && answer.code == code, "\(what): \(answer)", sourceLocation: sourceLocation)
        }
        let unknown = randomID(), message = randomID()
        check(try r1.ask(as: bob, "GET", "/v1/groups/\(unknown)"), 404, "unknown_group", "GET an unknown group")
        check(try r1.ask(as: alice, "PUT", "/v1/groups/\(unknown)/messages/\(message)", body: SecureRandom().bytes(500)),
               404, "unknown_group", "PUT a message in an unknown group")
        check(try r1.ask(as: bob, "GET", "/v1/groups/\(unknown)/messages/\(message)"), 404, "not_found", "GET a message in an unknown group")
        check(try r1.ask(as: bob, "POST", "/v1/groups/\(unknown)/messages/\(message)/confirm"), 404, "not_found", "confirm it")
        check(try r1.ask(as: alice, "GET", "/v1/groups/\(unknown)/messages/\(message)/receipts"), 404, "not_found", "its receipts")
        check(try r1.ask(as: alice, "PUT", "/v1/groups/\(unknown)", body: record), 400, "malformed", "the team's record under another id")
        check(try r1.ask(as: mallory, "GET", "/v1/groups/\(team)"), 403, "not_a_member", "a stranger reads the team")
        check(try r1.ask(as: mallory, "PUT", "/v1/groups/\(team)/messages/\(message)", body: SecureRandom().bytes(500)),
               403, "not_a_member", "a stranger stores in the team")

        for id in ["not-hex", String(repeating: "g", count: 32), team.uppercased(), String(team.dropLast()), team + "0", team + "00",
                   "%20" + String(team.dropFirst(3))] {
            check(try r1.ask(as: bob, "GET", "/v1/groups/\(id)"), 400, "malformed", "GET group \(id)")
            check(try r1.ask(as: alice, "PUT", "/v1/groups/\(id)", body: record), 400, "malformed", "PUT group \(id)")
            check(try r1.ask(as: alice, "PUT", "/v1/groups/\(team)/messages/\(id)", body: [1]), 400, "malformed", "PUT message \(id)")
            check(try r1.ask(as: bob, "GET", "/v1/groups/\(id)/messages/\(message)"), 400, "malformed", "GET a message in group \(id)")
        }
        // A path the API does not have: Hummingbird's own 404, before any route runs (so no
        // nonce is spent), with no body (Docs/RELAY.md: such answers are not signed).
        let nowhere = try r1.ask(as: bob, "GET", "/v1/nowhere")
        #expect(nowhere.status == 404 && nowhere.body.isEmpty, "\(nowhere)")
        var expected = before
        expected["nonces"]! += signed
        #expect(try world.counts(1) == expected)
        #expect(try world.groupVersions(1) == versions)
        // The group itself is there for its members.
        let good = try r1.ask(as: bob, "GET", "/v1/groups/\(team)")
        #expect(good.status == 200 && good.body == record, "\(good)")
    }

    /// 1,000 bogus requests a second for 10 s at one relay, from ten threads on 127.0.0.2
    /// (two of them opening a connection per request): unsigned, forged, skewed, and forged
    /// PUTs with bodies. Every one gets a JSON 401 or 429, none a 5xx or no answer; a member
    /// on 127.0.0.1 is served during and after; the relay's memory stays bounded; nothing is
    /// stored, not even a nonce.
    @Test func aFloodOfBogusRequests() throws {
        let world = try RelayWorld()
        let r1 = try Hand(world, relay: 1)
        let bob = try world.identity(world.bob)
        let team = try world.groupID()
        let pid = world.relays[0].pid
        // Warm up what a first request costs (allocator arenas, the router, SQLite's pages),
        // then take the baseline.
        for _ in 0..<20 { _ = try r1.ask(as: bob, "GET", "/v1/groups") }
        let before = try world.counts(1)
        let rssBefore = try memory(pid, "VmRSS"), fdsBefore = try openFiles(pid)

        let workers = 10, seconds = 10, perWorker = 100 * seconds
        // Kinds drawn at random: in a fixed rotation, the 50 a second that pass the address
        // limit once its burst is spent would alias onto a few kinds.
        let requests = (0..<workers).map { _ in (0..<perWorker).map { _ in bogusRequest(Int.random(in: 0..<4), team: team) } }
        let tally = Tally()
        let start = ProcessInfo.processInfo.systemUptime + 0.2
        let done = DispatchGroup()
        for w in 0..<workers {
            done.enter()
            let thread = Thread {
                defer { done.leave() }
                flood(port: r1.port, requests: requests[w], start: start + Double(w) / Double(workers * 100), interval: 0.01,
                      freshConnections: w >= 8, tally: tally)
            }
            thread.start()
        }
        var peak = rssBefore
        var during: LoopbackHTTP.Answer?
        while done.wait(timeout: .now() + 0.25) == .timedOut {
            peak = max(peak, (try? memory(pid, "VmRSS")) ?? 0)
            if during == nil, ProcessInfo.processInfo.systemUptime > start + 5 { during = try r1.ask(as: bob, "GET", "/v1/groups") }
        }
        let elapsed = ProcessInfo.processInfo.systemUptime - start
        // The kernel's high-water mark and our samples: the kernel updates the mark lazily.
        let highWater = max(peak, try memory(pid, "VmHWM"))
        let rssAfter = try memory(pid, "VmRSS")
        let rate = Double(tally.answered) / elapsed
        print("flood: \(tally.answered) answers in \(String(format: "%.2f", elapsed)) s (\(Int(rate))/s): \(tally.statuses), \(tally.codes); "
              + "RSS \(rssBefore / 1024) KiB before, peak \(highWater / 1024) KiB, "
              + "\(rssAfter / 1024) KiB after")

        // The flood was one: up to 1,000 a second for ~10 s, all answered. Its threads share
        // the machine with the rest of the run, and fell behind their pace under load (805/s
        // once in CI): at 250 a second it is still five times what the limit lets through,
        // and the counts below hold up to 40 s (500 + 50 × 40 let through).
        #expect(tally.failures.isEmpty, "\(tally.failures.count) requests had no answer: \(tally.failures.prefix(5))")
        #expect(tally.answered == workers * perWorker)
        #expect(rate > 250 && elapsed < 40, "\(rate) requests a second over \(elapsed) s")
        // Each got its JSON error: 401 for what fails authentication, 429 once 127.0.0.2's
        // bucket (a burst of 500, then 50 a second) is empty. So about 500 + 50 × 10 are
        // answered 401 and the rest 429; the bounds leave room for a slow machine.
        let expected: Set<String> = ["401 unsigned", "401 bad_signature", "401 clock_skew", "429 rate_limited"]
        #expect(Set(tally.codes.keys).isSubset(of: expected), "\(tally.codes)")
        #expect(tally.statuses.keys.allSatisfy { $0 < 500 }, "\(tally.statuses)")
        let limited = tally.codes["429 rate_limited"] ?? 0
        #expect(limited > workers * perWorker / 2, "\(tally.codes)")
        #expect((500...3000).contains(workers * perWorker - limited), "\(tally.codes)")
        // About 250 of each kind reach authentication (forged ones: 500), so each refusal was
        // met many times, and a relay that recorded forged nonces would have hundreds more rows.
        for code in ["401 unsigned", "401 bad_signature", "401 clock_skew"] {
            #expect(tally.codes[code, default: 0] >= 100, "\(code): \(tally.codes)")
        }

        // Up, and serving others: a member on another address during the flood and after;
        // on the flooded address once its bucket refilled a little.
        #expect(try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8).contains("State:\tZ") == false)
        #expect(during?.status == 200, "\(String(describing: during))")
        let after = try r1.ask(as: bob, "GET", "/v1/groups")
        #expect(after.status == 200 && after.text.contains(team), "\(after)")
        Thread.sleep(forTimeInterval: 1)
        let flooded = try r1.ask(as: bob, "GET", "/v1/groups", from: "127.0.0.2")
        #expect(flooded.status == 200, "\(flooded)")

        // Bounded memory. Measured on a 2-core machine (debug build): 58.6 to 59.1 MiB
        // resident before, 0.5 to 0.6 MiB more at the peak and after, for 10,000 requests:
        // what a request costs is freed with it, and the rate limiter's table holds two
        // addresses here. The peak must stay under 200 MiB in all, and within 32 MiB of
        // before, during the flood and after: 50 times the growth seen, room for allocator
        // arenas and SQLite's caches on another machine, while a leak of 3.3 KiB a request
        // (a request's head and buffers kept) would cross it.
        #expect(highWater < 200 << 20, "peak RSS \(highWater >> 20) MiB")
        #expect(highWater < rssBefore + 32 << 20, "RSS \(rssBefore >> 20) MiB before, peak \(highWater >> 20) MiB")
        #expect(rssAfter < rssBefore + 32 << 20, "RSS \(rssBefore >> 20) MiB before, \(rssAfter >> 20) MiB after")
        // The flood's connections are closed, so are the relay's ends of them, in time: on a
        // loaded machine (CI runs other suites beside this one) closing 2,000 connections'
        // ends took over 2 s, and once more than 10 s (17 left at 10 s; 0 when run alone).
        // A leak would keep hundreds; the margin is 16, waited for up to 30 s.
        var fdsAfter = try openFiles(pid)
        for _ in 0..<300 where fdsAfter > fdsBefore + 16 {
            Thread.sleep(forTimeInterval: 0.1)
            fdsAfter = try openFiles(pid)
        }
        #expect(fdsAfter <= fdsBefore + 16, "\(fdsBefore) open files before, \(fdsAfter) after")
        print("flood: \(fdsBefore) open files before, \(fdsAfter) after")

        // Nothing stored: only the three good requests' nonces.
        var stored = before
        stored["nonces"]! += 3
        #expect(try world.counts(1) == stored)
    }
}

// MARK: - Requests by hand

/// 32 random lowercase hex digits: an id no relay has.
private func randomID() -> String { SecureRandom().bytes(16).hex }

/// What the flood sends, by kind: no signature at all; a forged one (a random key, nonce
/// and signature, all well formed, and the time now); the same an hour old; a forged PUT of
/// a message share (300 bytes of noise) in the team. Each nonce is new, so a relay recording
/// nonces before checking signatures would grow its nonce table by one a request.
private func bogusRequest(_ kind: Int, team: String) -> [UInt8] {
    let random = SecureRandom()
    func forged(_ time: UInt64) -> [(String, String)] {
        [(RelayHeader.key, Base64URL.encode(random.bytes(32))), (RelayHeader.time, String(time)),
         (RelayHeader.nonce, Base64URL.encode(random.bytes(16))), (RelayHeader.bodyHash, Base64URL.encode(random.bytes(32))),
         (RelayHeader.signature, Base64URL.encode(random.bytes(64)))]
    }
    let now = UInt64(Date().timeIntervalSince1970)
    switch kind {
    case 0: return LoopbackHTTP.request("GET", "/v1/groups", headers: [])
    case 1: return LoopbackHTTP.request("GET", "/v1/groups", headers: forged(now + 5))
    case 2: return LoopbackHTTP.request("GET", "/v1/messages?limit=10", headers: forged(now - 3600))
    default: return LoopbackHTTP.request("PUT", "/v1/groups/\(team)/messages/\(randomID())", headers: forged(now + 5), body: random.bytes(300))
    }
}

/// One flooding thread: sends `requests` from 127.0.0.2, the k-th at `start + k × interval`
/// (catching up when late), and counts the answers.
private func flood(port: Int, requests: [[UInt8]], start: TimeInterval, interval: TimeInterval, freshConnections: Bool, tally: Tally) {
    var connection: LoopbackHTTP?
    for (k, request) in requests.enumerated() {
        let wait = start + Double(k) * interval - ProcessInfo.processInfo.systemUptime
        if wait > 0 { usleep(UInt32(wait * 1_000_000)) }
        do {
            if connection == nil { connection = try LoopbackHTTP(port: port, from: "127.0.0.2") }
            tally.add(try connection!.exchange(request))
            if freshConnections || connection!.closed { connection = nil }
        } catch {
            tally.fail("\(error)")
            connection = nil
        }
    }
}

/// The flood's answers, from all its threads.
private final class Tally: @unchecked Sendable {
    private let lock = NSLock()
    private var _statuses: [Int: Int] = [:], _codes: [String: Int] = [:], _failures: [String] = []

    func add(_ answer: LoopbackHTTP.Answer) {
        lock.withLock {
            _statuses[answer.status, default: 0] += 1
            _codes["\(answer.status) \(answer.code ?? "no JSON code: \(answer.text)")", default: 0] += 1
        }
    }

    func fail(_ words: String) { lock.withLock { _failures.append(words) } }
    var statuses: [Int: Int] { lock.withLock { _statuses } }
    var codes: [String: Int] { lock.withLock { _codes } }
    var failures: [String] { lock.withLock { _failures } }
    var answered: Int { lock.withLock { _statuses.values.reduce(0, +) } }
}

/// A line of /proc/PID/status in bytes (VmRSS: resident now; VmHWM: the most resident).
func memory(_ pid: pid_t, _ field: String) throws -> Int {
    let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
          let kib = Int(line.split(separator: " ").dropLast().last ?? "") else {
        throw LoopbackHTTP.Failure(description: "no \(field) in /proc/\(pid)/status")
    }
    return kib * 1024
}

func openFiles(_ pid: pid_t) throws -> Int { try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count }

/// Requests to one relay of a RelayWorld, signed by hand.
private struct Hand {
    let port: Int
    let relayKey: [UInt8]

    /// Relay `i`, 1-based as its database and its name (r1, r2, r3).
    init(_ world: RelayWorld, relay i: Int) throws {
        port = Int(world.urls[i - 1].split(separator: ":").last!)!
        relayKey = try KeyCard(text: try RelayTests().cardOf(world.urls[i - 1])).signingKey
    }

    /// The headers that sign a request by `identity`: over `hash` when given, else over the
    /// body's own hash.
    func signed(_ identity: Identity, _ method: String, _ target: String, body: [UInt8] = [], hash: [UInt8]? = nil,
                time: UInt64 = UInt64(Date().timeIntervalSince1970), nonce: [UInt8] = SecureRandom().bytes(16)) -> [(String, String)] {
        RequestSignature.headers(identity: identity, relay: relayKey, method: method, path: target, bodyHash: hash ?? sha256(body),
                                 time: time, nonce: nonce)
    }

    /// A request on a connection of its own, from `source`.
    func ask(_ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8] = [],
             framing: LoopbackHTTP.Framing = .length, from source: String = "127.0.0.1") throws -> LoopbackHTTP.Answer {
        let connection = try LoopbackHTTP(port: port, from: source)
        return try connection.exchange(LoopbackHTTP.request(method, target, headers: headers, body: body, framing: framing))
    }

    /// A request signed right by `identity`.
    func ask(as identity: Identity, _ method: String, _ target: String, body: [UInt8] = [], framing: LoopbackHTTP.Framing = .length,
             from source: String = "127.0.0.1") throws -> LoopbackHTTP.Answer {
        try ask(method, target, headers: signed(identity, method, target, body: body), body: body, framing: framing, from: source)
    }
}

extension [(String, String)] {
    fileprivate func value(_ name: String) -> String? { first { $0.0 == name }?.1 }
    fileprivate func setting(_ name: String, _ value: String) -> [(String, String)] { map { $0.0 == name ? (name, value) : $0 } }
}

extension RelayWorld {
    /// A user's identity, from its keystore.
    fileprivate func identity(_ user: User) throws -> Identity {
        try Keystore.open(home: VaultHome.resolve(explicit: user.directory.file("home"))).unlock(passphrase: nil)
    }

    /// Rows in each table of relay `i`'s store (1-based).
    fileprivate func counts(_ i: Int) throws -> [String: Int] {
        var counts = try database(i).read { db in
            try Dictionary(uniqueKeysWithValues: ["groups", "members", "messages", "recipients", "chunks"].map { table in
                (table, try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? -1)
            })
        }
        counts["nonces"] = try nonceCount(i)
        return counts
    }

    /// Each group's id and version on relay `i`.
    fileprivate func groupVersions(_ i: Int) throws -> [String: Int64] {
        try database(i).read { db in
            Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT id, version FROM groups").map {
                ([UInt8]($0["id"] as Data).hex, $0["version"] as Int64)
            })
        }
    }

    /// The one group's record as relay `i` keeps it.
    fileprivate func groupRecord(_ i: Int) throws -> [UInt8] {
        try database(i).read { db in [UInt8](try Data.fetchOne(db, sql: "SELECT record FROM groups")!) }
    }

    /// A share relay `i` stored (the only one, or the largest), with its group and id.
    fileprivate func storedShare(_ i: Int, largest: Bool = false) throws -> (group: String, id: String, bytes: [UInt8]) {
        try database(i).read { db in
            let rows = try Row.fetchAll(db, sql: "SELECT row, group_id, id FROM messages WHERE ready = 1 ORDER BY size DESC")
            guard let row = rows.first, largest || rows.count == 1 else { throw LoopbackHTTP.Failure(description: "\(rows.count) shares on r\(i)") }
            let chunks = try Data.fetchAll(db, sql: "SELECT bytes FROM chunks WHERE message = ? ORDER BY n", arguments: [row["row"] as Int64])
            return ([UInt8](row["group_id"] as Data).hex, [UInt8](row["id"] as Data).hex, chunks.flatMap { [UInt8]($0) })
        }
    }
}

// MARK: - HTTP/1.1 over a socket

/// HTTP/1.1 over one blocking TCP socket on loopback, for what URLSession will not send: a
/// Content-Length with no body behind it, a chunked body, any header or none, and a
/// source address of our choosing in 127/8 (the relay's rate limit is per address).
final class LoopbackHTTP {
    struct Answer: CustomStringConvertible {
        let status: Int
        let headers: [String: String]
        let body: [UInt8]
        /// The relay said it closes the connection.
        var closed: Bool { headers["connection"]?.lowercased() == "close" }
        var text: String { String(decoding: body, as: UTF8.self) }
        /// The JSON error's code, if the body is one.
        var code: String? {
            guard headers["content-type"] == "application/json" else { return nil }
            return (try? JSONDecoder().decode(RelayAPI.Failure.self, from: Data(body)))?.code
        }
        var description: String { "\(status) \(text)" }
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    /// How a request's body is framed: by its length; by a declared length with no body
    /// sent; or chunked, in pieces of this many bytes.
    enum Framing {
        case length
        case declared(UInt64)
        case chunked(Int)
    }

    private let socket: Int32
    private var buffered: [UInt8] = []
    /// The relay said it closes the connection, or closed it.
    private(set) var closed = false

    init(port: Int, from source: String = "127.0.0.1", timeout: Int = 10) throws {
        socket = try Self.connect(port: port, from: source) { socket in
            var time = timeval(tv_sec: timeout, tv_usec: 0)
            setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
            var one: Int32 = 1
            setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// A TCP socket connected from `source` (an address of 127/8) to `port` on 127.0.0.1,
    /// `configure`d before it connects.
    static func connect(port: Int, from source: String, configure: (Int32) -> Void = { _ in }) throws -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        configure(socket)
        func address(_ host: String, _ port: Int) -> sockaddr_in {
            sockaddr_in(sin_family: sa_family_t(AF_INET), sin_port: UInt16(port).bigEndian, sin_addr: in_addr(s_addr: inet_addr(host)),
                        sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
        }
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        var local = address(source, 0), remote = address("127.0.0.1", port)
        guard withUnsafePointer(to: &local, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) } }) == 0,
              withUnsafePointer(to: &remote, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, length) } }) == 0
        else {
            let words = String(cString: strerror(errno))
            close(socket)
            throw Failure(description: "connect from \(source) to port \(port): \(words)")
        }
        return socket
    }

    deinit { close(socket) }

    /// Shuts the connection both ways, as a client that goes away does; a read blocked on it
    /// returns.
    func hangUp() { shutdown(socket, Int32(SHUT_RDWR)) }

    static func request(_ method: String, _ target: String, headers: [(String, String)], body: [UInt8] = [],
                        framing: Framing = .length) -> [UInt8] {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        var bytes: [UInt8]
        switch framing {
        case .length:
            bytes = Array((head + "Content-Length: \(body.count)\r\n\r\n").utf8) + body
        case .declared(let length):
            bytes = Array((head + "Content-Length: \(length)\r\n\r\n").utf8)
        case .chunked(let size):
            bytes = Array((head + "Transfer-Encoding: chunked\r\n\r\n").utf8)
            for start in stride(from: 0, to: body.count, by: size) {
                let piece = body[start..<min(body.count, start + size)]
                bytes += Array("\(String(piece.count, radix: 16))\r\n".utf8) + piece + Array("\r\n".utf8)
            }
            bytes += Array("0\r\n\r\n".utf8)
        }
        return bytes
    }

    /// Sends a request and reads its answer. A relay may answer before it read all of the
    /// body (a refusal), so the send runs beside the read, and a send cut short by the
    /// relay's closing counts for nothing once the answer is in.
    func exchange(_ request: [UInt8]) throws -> Answer {
        if request.count <= 1 << 16 {
            try send(request)
            return try receive()
        }
        let socket = self.socket
        let sent = DispatchSemaphore(value: 0)
        Thread {
            var offset = 0
            while offset < request.count {
                let n = request[offset...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard n > 0 else { break }
                offset += n
            }
            sent.signal()
        }.start()
        defer {
            // Unblocks the sender if the relay stopped reading the body.
            if sent.wait(timeout: .now() + 2) == .timedOut {
                shutdown(socket, Int32(SHUT_RDWR))
                sent.wait()
            }
        }
        return try receive()
    }

    /// Sends bytes, part of a request maybe (the rest later, then ``receive()``).
    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure(description: "send: \(String(cString: strerror(errno)))") }
            offset += n
        }
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
        guard n > 0 else {
            closed = true
            throw Failure(description: n == 0 ? "the relay closed the connection" : "recv: \(String(cString: strerror(errno)))")
        }
        buffered += chunk[..<n]
    }

    private func line() throws -> String {
        while true {
            if let end = buffered.indices.dropLast().first(where: { buffered[$0] == 13 && buffered[$0 + 1] == 10 }) {
                let text = String(decoding: buffered[..<end], as: UTF8.self)
                buffered.removeFirst(end + 2)
                return text
            }
            try fill()
        }
    }

    private func take(_ count: Int) throws -> [UInt8] {
        while buffered.count < count { try fill() }
        defer { buffered.removeFirst(count) }
        return Array(buffered[..<count])
    }

    /// Reads an answer.
    func receive() throws -> Answer {
        let statusLine = try line()
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            throw Failure(description: "not an HTTP status line: \(statusLine)")
        }
        var headers: [String: String] = [:]
        while case let header = try line(), !header.isEmpty {
            guard let colon = header.firstIndex(of: ":") else { throw Failure(description: "not a header: \(header)") }
            headers[header[..<colon].lowercased()] = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        // An interim answer: the real one follows.
        if (100..<200).contains(status) { return try receive() }
        var body: [UInt8] = []
        if status == 204 || status == 304 {
            // No body, whatever the headers say (RFC 9112 §6.3): read to the close, it took
            // the socket's whole 10 s receive timeout.
        } else if headers["transfer-encoding"]?.lowercased() == "chunked" {
            while let size = Int(try line().split(separator: ";").first ?? "", radix: 16), size > 0 {
                body += try take(size)
                _ = try take(2)
            }
            while try !line().isEmpty {}
        } else if let length = headers["content-length"].flatMap({ Int($0) }) {
            body = try take(length)
        } else {
            while true {
                do { try fill() } catch { break }
            }
            body = buffered
            buffered = []
        }
        if headers["connection"]?.lowercased() == "close" { closed = true }
        return Answer(status: status, headers: headers, body: body)
    }
}
