import Foundation
import GRDB
import Testing
import VaultCore
import VaultRelayClient
import VaultRelayProtocol
import VaultTestSupport

/// Issue 33's waiting lists (`GET /v1/messages?wait=S`) against real relay processes on
/// loopback (RelayWorld): a waiting list answers as soon as a message for its caller is
/// stored, and only then; the relay holds a few per key and drops those whose client hung up;
/// a relay shutting down answers them at once. Requests are signed by hand, each on a
/// connection and a thread of its own, and timed: the bounds are seconds apart, so that a
/// slow machine does not decide them.
@Suite(.serialized) struct WaitingListTests {
    /// Nothing arrives: the list is answered empty after its wait. A message arrives: a list
    /// waiting 30 s answers with it well before, signed over its own nonce, with `last`; asked
    /// again after `last`, the relay holds it again. Waits out of 1 … 30 are refused.
    @Test func aWaitingListAnswersWhenAMessageArrives() throws {
        let world = try RelayWorld()
        let r1 = try WaitingRelay(world.urls[0])
        let bob = try signingIdentity(of: world.bob)

        for wait in ["0", "31", "abc", "-1", "+5", "1.5", "", "99999999999999999999"] {
            let refused = try r1.ask(bob, "/v1/messages?wait=\(wait)").answer(within: 10)
            #expect(refused.status == 400 && refused.code == "malformed", "wait=\(wait): \(refused)")
        }

        let quiet = try r1.ask(bob, "/v1/messages?wait=2")
        let empty = try quiet.answer(within: 20)
        #expect(empty.status == 200 && empty.text == "{\"messages\":[]}", "\(empty)")
        #expect(quiet.elapsed! >= 1.9 && quiet.elapsed! < 10, "\(quiet.elapsed!) s")

        let waiting = try r1.ask(bob, "/v1/messages?wait=30")
        Thread.sleep(forTimeInterval: 1)
        #expect(waiting.elapsed == nil, "answered before anything was sent: \(String(describing: waiting.result))")
        let id = try world.alice.ok("send", "--group", "team", "-", stdin: "ping").trimmingCharacters(in: .newlines)
        let sent = PendingAnswer.now
        let answer = try waiting.answer(within: 40)
        #expect(waiting.answered(after: sent)! < 10 && waiting.elapsed! < 29, "answered \(waiting.answered(after: sent)!) s after the send, \(waiting.elapsed!) s into a 30 s wait")
        #expect(answer.status == 200 && answer.text.contains(id), "\(answer)")
        #expect(try r1.signs(answer, over: waiting.nonce))
        let page = try JSONDecoder().decode(RelayAPI.Messages.self, from: Data(answer.body))
        #expect(page.messages.map(\.id) == [id] && page.next == nil)
        let last = try #require(page.last)

        // After it: nothing, so held again, for its wait. From the start: the message, at once.
        let after = try r1.ask(bob, "/v1/messages?after=\(last)&wait=2")
        #expect(try after.answer(within: 20).text == "{\"messages\":[]}")
        #expect(after.elapsed! >= 1.9, "\(after.elapsed!) s")
        let again = try r1.ask(bob, "/v1/messages?after=0&wait=30")
        #expect(try again.answer(within: 20).text.contains("\"last\":\(last)"))
        #expect(again.elapsed! < 15, "\(again.elapsed!) s")
    }

    /// bob's message to alice wakes alice's waiting list, not bob's own: his waits its time
    /// out and answers empty.
    @Test func aMessageForSomeoneElseDoesNotWakeTheCaller() throws {
        let world = try RelayWorld()
        let r1 = try WaitingRelay(world.urls[0])
        let alice = try signingIdentity(of: world.alice), bob = try signingIdentity(of: world.bob)
        try world.bob.ok("receive")
        let bobs = try r1.ask(bob, "/v1/messages?wait=5")
        let alices = try r1.ask(alice, "/v1/messages?wait=30")
        Thread.sleep(forTimeInterval: 1)
        let id = try world.bob.ok("send", "--group", "team", "-", stdin: "pong").trimmingCharacters(in: .newlines)
        let sent = PendingAnswer.now
        #expect(try alices.answer(within: 40).text.contains(id))
        #expect(alices.answered(after: sent)! < 10 && alices.elapsed! < 29, "answered \(alices.answered(after: sent)!) s after the send")
        #expect(bobs.elapsed == nil || bobs.elapsed! >= 4.9, "bob's list answered early: \(String(describing: bobs.result))")
        #expect(try bobs.answer(within: 20).text == "{\"messages\":[]}")
        #expect(bobs.elapsed! >= 4.9, "\(bobs.elapsed!) s")
    }

    /// A stranger's waiting list (a key in no group) is answered at once. Four waiting lists
    /// of one member's key are held and a fifth is answered at once; one message wakes all
    /// four. Four more are then held (the woken ones left no slot taken); once
    /// their clients hang up, the relay frees their slots within seconds. A relay stopped
    /// with SIGTERM answers a waiting list and exits at once, rather than after its wait.
    @Test func aKeyWaitsAtMostFourTimesAndLeavesNothingBehind() throws {
        let world = try RelayWorld()
        let r1 = try WaitingRelay(world.urls[0])
        let bob = try signingIdentity(of: world.bob)

        /// Four lists asked at once, once the relay took them in: each request's nonce is
        /// stored as its signature checks out, just before it waits.
        func fourWaiting(_ target: String) throws -> [PendingAnswer] {
            let nonces = try world.nonceCount(1)
            let lists = try (0..<4).map { _ in try r1.ask(bob, target) }
            _ = try eventually(within: 10) { try world.nonceCount(1) >= nonces + 4 }
            Thread.sleep(forTimeInterval: 0.5)
            return lists
        }
        /// Whether a fifth list is answered at once (well before its 10 s).
        func full() throws -> Bool {
            let probe = try r1.ask(bob, "/v1/messages?wait=10")
            _ = try probe.answer(within: 30)
            return probe.elapsed! < 5
        }

        // A key that is in no group here has nothing to wait for: answered at once.
        let mallory = Identity.generate(label: try Label("mallory")).0
        let stranger = try r1.ask(mallory, "/v1/messages?wait=30")
        #expect(try stranger.answer(within: 20).text == "{\"messages\":[]}")
        #expect(stranger.elapsed! < 15, "\(stranger.elapsed!) s")

        let four = try fourWaiting("/v1/messages?wait=30")
        #expect(try full())
        #expect(four.allSatisfy { $0.elapsed == nil }, "\(four.map(\.result))")
        let id = try world.alice.ok("send", "--group", "team", "-", stdin: "to all four").trimmingCharacters(in: .newlines)
        let sent = PendingAnswer.now
        for waiter in four {
            #expect(try waiter.answer(within: 40).text.contains(id))
            #expect(waiter.answered(after: sent)! < 10 && waiter.elapsed! < 29, "answered \(waiter.answered(after: sent)!) s after the send")
        }
        let last = try #require(try JSONDecoder().decode(RelayAPI.Messages.self, from: Data(four[0].answer(within: 1).body)).last)

        let more = try fourWaiting("/v1/messages?after=\(last)&wait=30")
        #expect(try full())
        #expect(more.allSatisfy { $0.elapsed == nil }, "a slot was still taken by a woken list: \(more.map(\.result))")
        for waiter in more { waiter.hangUp() }
        var held = false
        for _ in 0..<10 where !held {
            let probe = try r1.ask(bob, "/v1/messages?after=\(last)&wait=3")
            _ = try probe.answer(within: 20)
            held = probe.elapsed! >= 2.9
            if !held { Thread.sleep(forTimeInterval: 0.5) }
        }
        #expect(held, "the hung-up lists still hold their slots")

        let taken = try world.nonceCount(1)
        let stopped = try r1.ask(bob, "/v1/messages?after=\(last)&wait=30")
        #expect(try eventually(within: 10) { try world.nonceCount(1) > taken }, "the relay never took the list in")
        let start = ProcessInfo.processInfo.systemUptime
        #expect(world.relays[0].stop(SIGTERM) == 0)
        #expect(ProcessInfo.processInfo.systemUptime - start < 10, "the relay took \(ProcessInfo.processInfo.systemUptime - start) s to stop")
        let answer = try stopped.answer(within: 10)
        #expect(answer.status == 200 && answer.text == "{\"messages\":[]}", "\(answer)")
        #expect(stopped.elapsed! < 15, "\(stopped.elapsed!) s")
    }

    /// A list whose client hangs up frees its slot at once: five times over, bob's four
    /// lists hang up and four more are asked a fifth of a second later, and every one of
    /// them waits. (When the relay looked at its connections once a second, the four asked
    /// again found the slots still taken by the lists hung up, and were answered at once.)
    @Test func aHungUpListFreesItsSlotAtOnce() throws {
        let world = try RelayWorld()
        let r1 = try WaitingRelay(world.urls[0])
        let bob = try signingIdentity(of: world.bob)
        var answeredAtOnce: [Int] = []
        for _ in 0..<5 {
            let nonces = try world.nonceCount(1)
            let lists = try (0..<4).map { _ in try r1.ask(bob, "/v1/messages?wait=30") }
            // Taken in (each nonce is stored as its signature checks out, just before the
            // list waits), and time for a refusal's answer to come.
            _ = try eventually(within: 5, every: 0.05) { try world.nonceCount(1) >= nonces + 4 }
            Thread.sleep(forTimeInterval: 0.3)
            answeredAtOnce.append(lists.filter { $0.elapsed != nil }.count)
            for list in lists { list.hangUp() }
            Thread.sleep(forTimeInterval: 0.2)
        }
        #expect(answeredAtOnce == [0, 0, 0, 0, 0], "lists answered at once, each round: \(answeredAtOnce)")
    }

    /// The client's function: a list waiting 30 s returns as soon as a message for bob is
    /// stored, with its cursor; after that cursor, a 2 s wait returns nothing, and no cursor,
    /// once its time is up. A relay answering under another card is refused as forged.
    @Test func theClientWaitsAndKeepsItsPlace() async throws {
        let world = try RelayWorld()
        let bob = try signingIdentity(of: world.bob)
        let card = try KeyCard(text: try RelayTests().cardOf(world.urls[0]))
        let r1 = RelayConnection(name: "r1", url: world.urls[0], card: card, identity: bob)
        let clock = ContinuousClock()
        // On a thread of its own: on the cooperative pool, held by other tests, the answer
        // was once read 30 s after it came (VaultTestSupport.OwnThread).
        let waiting = Task {
            try await OwnThread.run {
                let (messages, last) = try await r1.messages(wait: 30)
                return (messages, last, clock.now)
            }
        }
        try await Task.sleep(for: .seconds(1))
        let id = try world.alice.ok("send", "--group", "team", "-", stdin: "ping").trimmingCharacters(in: .newlines)
        // Timed from the end of the send, not the start of the wait: a loaded machine may take
        // many seconds to start `vault send`, and the list must answer once it is stored, not
        // when its 30 s are up.
        let sent = clock.now
        let (messages, last, answered) = try await waiting.value
        #expect(messages.map(\.id) == [id] && last != nil)
        #expect(answered - sent < .seconds(10), "answered \(answered - sent) after the send ended")

        let quiet = clock.now
        let (none, noCursor) = try await r1.messages(after: try #require(last), wait: 2)
        #expect(none.isEmpty && noCursor == nil)
        #expect(clock.now - quiet >= .seconds(1.9), "\(clock.now - quiet)")
        #expect(try await r1.messages().messages.map(\.id) == [id])

        let impostor = RelayConnection(name: "r1", url: world.urls[0], card: try KeyCard(text: try RelayTests().cardOf(world.urls[1])),
                                       identity: bob)
        do {
            _ = try await impostor.messages(wait: 1)
            Issue.record("an answer signed by another card was taken")
        } catch let error as RelayError {
            #expect(error.code == "forged", "\(error)")
        }
    }

    /// The client's wait, refused a slot (bob's key holds four lists at every relay, as a
    /// program whose earlier lists were hung up left them), asks again within seconds
    /// rather than at the end of its wait: a message stored after those lists are gone
    /// ends it at once, not 25 s after it began.
    @Test func aClientRefusedASlotAsksAgain() async throws {
        let world = try RelayWorld()
        let bob = try signingIdentity(of: world.bob)
        let groups = try Keystore.open(home: VaultHome.resolve(explicit: world.alice.directory.file("home"))).groups()
        // All of it on a thread of its own, the setup too: held up on the shared pool (CI's
        // synchronous tests have held it for more than 30 s), the held lists' 30 s ran out
        // before the wait began, and the wait, refused nothing, proved nothing.
        try await OwnThread.run {
            let cursors = await RelayMail.latest(groups: groups, identity: bob)
            try #require(cursors.count == 3, "\(cursors)")
            var held: [PendingAnswer] = []
            for (i, url) in world.urls.enumerated() {
                let relay = try WaitingRelay(url)
                let fingerprint = try #require(groups.first?.relays.first { $0.url == url }?.card.fingerprint)
                let cursor = try #require(cursors[fingerprint])
                let nonces = try world.nonceCount(i + 1)
                held += try (0..<4).map { _ in try relay.ask(bob, "/v1/messages?after=\(cursor)&wait=30") }
                for _ in 0..<100 where try world.nonceCount(i + 1) < nonces + 4 {
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            try await Task.sleep(for: .milliseconds(500))
            try #require(held.allSatisfy { $0.elapsed == nil }, "answered after \(held.map(\.elapsed)) s: \(held.map(\.result))")

            // The send could otherwise come after the wait's 25 s and prove nothing.
            let clock = ContinuousClock()
            async let answered = { () async -> ContinuousClock.Instant in
                await RelayMail.waitForMail(groups: groups, identity: bob, after: cursors)
                return clock.now
            }()
            try await Task.sleep(for: .seconds(1))
            for list in held { list.hangUp() }
            try await Task.sleep(for: .seconds(4))
            _ = try world.alice.ok("send", "--group", "team", "-", stdin: "heard")
            let sent = clock.now
            let ended = await answered
            #expect(ended > sent && ended - sent < .seconds(10), "the wait ended \(ended - sent) after the send")
        }
    }

    /// A MailWait (the wait `vault app watch` keeps on the relays) outlives the other
    /// wake-ups of its watch: they neither end it nor make it ask the relays again (each
    /// relay took one signed request, its waiting list, and no more). When it ends (here a
    /// message for bob), it wakes the watch.
    @Test func aMailWaitOutlivesOtherWakeUps() async throws {
        let world = try RelayWorld()
        let bob = try signingIdentity(of: world.bob)
        let groups = try Keystore.open(home: VaultHome.resolve(explicit: world.alice.directory.file("home"))).groups()
        // The test's steps on a thread of their own, so that the tests holding the shared
        // pool do not stretch them past the wait's 25 s.
        try await OwnThread.run {
            let cursors = await RelayMail.latest(groups: groups, identity: bob)
            let before = try (1...3).map(world.nonceCount)
            let wakeup = Wakeup()
            // The wait's own task on a thread of its own too: on the shared pool, held for
            // 30 s and more, the wait's 25 s could run out before its first requests went.
            let mail = MailWait(groups: groups, identity: bob, after: cursors, signalling: wakeup, executor: OwnThread.executor())
            func asked() throws -> [Int] { try zip((1...3).map(world.nonceCount), before).map { $0 - $1 } }
            // A wait for the first requests, not a time limit on them: a loaded machine may
            // take long to sign and send them.
            for _ in 0..<3000 where try asked().contains(0) { try await Task.sleep(for: .milliseconds(100)) }
            let first = try asked()
            try #require(first == [1, 1, 1], "requests a relay: \(first)")
            for _ in 0..<8 {
                wakeup.signal()
                await wakeup.wait()
                try await Task.sleep(for: .milliseconds(150))
            }
            #expect(!mail.hasEnded)
            let after = try asked()
            #expect(after == [1, 1, 1], "requests a relay: \(after)")

            _ = try world.alice.ok("send", "--group", "team", "-", stdin: "for the watch")
            await wakeup.wait()
            #expect(mail.hasEnded)
        }
    }

    /// Cursors follow the order in which messages were finished, not begun: a large share
    /// whose upload began first and ends last is listed after the cursor of a small one
    /// stored meanwhile, so a client that asks for what came after the small one gets it.
    @Test func aMessageFinishedLastComesAfterTheCursorsBeforeIt() throws {
        let world = try RelayWorld()
        let r1 = try WaitingRelay(world.urls[0])
        let alice = try signingIdentity(of: world.alice), bob = try signingIdentity(of: world.bob)
        let file = world.alice.directory.file("big.bin")
        try Data(SecureRandom().bytes(400_000)).write(to: URL(fileURLWithPath: file))
        try world.alice.ok("send", file, "--group", "team")
        try world.alice.ok("send", "--group", "team", "-", stdin: "small")
        // r1's two shares, taken out of its store to be stored again by hand.
        let shares = try world.database(1).write { db in
            let rows = try Row.fetchAll(db, sql: "SELECT row, group_id, id FROM messages ORDER BY size DESC")
            let shares = try rows.map { row in
                let chunks = try Data.fetchAll(db, sql: "SELECT bytes FROM chunks WHERE message = ? ORDER BY n", arguments: [row["row"] as Int64])
                return (path: "/v1/groups/\([UInt8](row["group_id"] as Data).hex)/messages/\([UInt8](row["id"] as Data).hex)",
                        id: [UInt8](row["id"] as Data).hex, bytes: chunks.flatMap { [UInt8]($0) })
            }
            try db.execute(sql: "DELETE FROM messages")
            return shares
        }
        let (large, small) = (shares[0], shares[1])
        func put(_ share: (path: String, id: String, bytes: [UInt8])) throws -> [UInt8] {
            let headers = RequestSignature.headers(identity: alice, relay: r1.key, method: "PUT", path: share.path, bodyHash: sha256(share.bytes))
            return LoopbackHTTP.request("PUT", share.path, headers: headers, body: share.bytes)
        }

        // The large share's upload begins (its row is made once its header is in), the small
        // one is stored whole, and bob lists the small one.
        let upload = try LoopbackHTTP(port: r1.port, timeout: 30)
        let request = try put(large)
        try upload.send(Array(request[..<(request.count / 2)]))
        var begun = false
        for _ in 0..<100 where !begun {
            begun = try world.database(1).read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM messages WHERE ready = 0") } == 1
            if !begun { Thread.sleep(forTimeInterval: 0.1) }
        }
        #expect(begun)
        #expect(try LoopbackHTTP(port: r1.port).exchange(try put(small)).status == 201)
        let first = try JSONDecoder().decode(RelayAPI.Messages.self, from: Data(r1.ask(bob, "/v1/messages").answer(within: 10).body))
        #expect(first.messages.map(\.id) == [small.id])
        let last = try #require(first.last)

        // The large one ends, and comes after that cursor.
        try upload.send(Array(request[(request.count / 2)...]))
        #expect(try upload.receive().status == 201)
        let after = try r1.ask(bob, "/v1/messages?after=\(last)&wait=30")
        let second = try JSONDecoder().decode(RelayAPI.Messages.self, from: Data(after.answer(within: 40).body))
        #expect(second.messages.map(\.id) == [large.id])
        #expect(after.elapsed! < 15, "\(after.elapsed!) s")
    }
}

/// One relay of a RelayWorld, for requests signed by hand.
struct WaitingRelay {
    let port: Int
    let key: [UInt8]

    init(_ url: String) throws {
        port = Int(url.split(separator: ":").last!)!
        key = try KeyCard(text: try RelayTests().cardOf(url)).signingKey
    }

    /// A GET signed by `identity`, sent now on a connection of its own.
    func ask(_ identity: Identity, _ target: String) throws -> PendingAnswer {
        let nonce = SecureRandom().bytes(RequestSignature.nonceLength)
        let headers = RequestSignature.headers(identity: identity, relay: key, method: "GET", path: target, bodyHash: sha256([]), nonce: nonce)
        return try PendingAnswer(port: port, request: LoopbackHTTP.request("GET", target, headers: headers), nonce: nonce)
    }

    /// Whether the answer is signed by this relay over `nonce`, its status and its body.
    func signs(_ answer: LoopbackHTTP.Answer, over nonce: [UInt8]) throws -> Bool {
        guard let signature = answer.headers["vault-signature"].flatMap({ Base64URL.decode($0, length: 64) }),
              let time = answer.headers["vault-time"].flatMap({ UInt64($0) }),
              answer.headers["vault-body-sha256"] == Base64URL.encode(sha256(answer.body)) else { return false }
        let message = ResponseSignature.message(relay: key, requestNonce: nonce, status: answer.status, time: time, bodyHash: sha256(answer.body))
        return KeyCard.verify(signature: signature, of: message, signingKey: key)
    }
}

/// A request on a thread of its own, and its answer once it comes, with the seconds it took.
final class PendingAnswer: @unchecked Sendable {
    let nonce: [UInt8]
    private let connection: LoopbackHTTP
    private let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var _result: Result<LoopbackHTTP.Answer, any Error>?
    private var _elapsed: Double?
    private var _answeredAt: Double?

    init(port: Int, request: [UInt8], nonce: [UInt8]) throws {
        self.nonce = nonce
        connection = try LoopbackHTTP(port: port, timeout: 60)
        let start = ProcessInfo.processInfo.systemUptime
        Thread { [self] in
            let result = Result { try connection.exchange(request) }
            let now = ProcessInfo.processInfo.systemUptime
            lock.withLock {
                _result = result
                _elapsed = now - start
                _answeredAt = now
            }
            done.signal()
        }.start()
    }

    /// The system's uptime now, in seconds: what ``answered(after:)`` takes.
    static var now: Double { ProcessInfo.processInfo.systemUptime }

    /// Seconds from `instant` (a ``now``) to the answer; nil while none came. A list woken by
    /// a send is timed from the send's end: a loaded machine may take many seconds to run
    /// `vault send`, and the list must answer once the message is stored.
    func answered(after instant: Double) -> Double? { lock.withLock { _answeredAt.map { $0 - instant } } }

    /// The answer, or what went wrong; nil while none came.
    var result: Result<LoopbackHTTP.Answer, any Error>? { lock.withLock { _result } }
    /// Seconds from the request to its answer; nil while none came.
    var elapsed: Double? { lock.withLock { _elapsed } }

    /// The answer, waiting for it at most `seconds`.
    func answer(within seconds: Double) throws -> LoopbackHTTP.Answer {
        if result == nil {
            guard done.wait(timeout: .now() + seconds) == .success else { throw LoopbackHTTP.Failure(description: "no answer in \(seconds) s") }
            done.signal()
        }
        return try result!.get()
    }

    /// Closes the connection, as a client that goes away does.
    func hangUp() { connection.hangUp() }
}

/// A user's identity, from its keystore.
func signingIdentity(of user: User) throws -> Identity {
    try Keystore.open(home: VaultHome.resolve(explicit: user.directory.file("home"))).unlock(passphrase: nil)
}
