import Foundation
import Testing
import VaultTestSupport

/// Issue 14, finding 1: a holder releases its piece only with its person's consent (or an
/// explicit opt-in), so a thief with one machine cannot collect the others' pieces.
@Suite struct ConsentTests {
    /// Alice dealt a note 2 of 3 to Bob and Carol; Bob and Carol serve, and nobody opted in
    /// to automatic release.
    final class Setup {
        let holders: SharedKeyTests.Holders
        let id: String

        /// Each holder's person has 120 s to decide, but those given in `consentTimeouts`.
        init(consentTimeouts: [String: Int] = [:]) throws {
            holders = try SharedKeyTests.Holders(["alice", "bob", "carol"], serving: [], autoRelease: false)
            id = try holders.circle.share(from: "alice", ["-", "--to", "bob,carol", "-k", "2", "--description", "the safe"])
            for label in ["bob", "carol"] {
                try holders.start(label, ["--consent-timeout", String(consentTimeouts[label] ?? 120)])
            }
        }

        deinit { holders.stopAll() }

        func peers() -> [String] {
            ["bob", "carol"].flatMap { ["--peer", "\($0)=\(holders.servers[$0]!.address)"] }
        }

        /// Alice's recovery, left running.
        func recover(_ extra: [String] = []) throws -> (BackgroundProcess, String) {
            let output = holders.circle.files.file("out-\(UUID().uuidString)")
            let process = try holders["alice"].vault.background(["recover", id, "-o", output] + peers() + extra,
                                                               log: holders.circle.files.file("recover-\(UUID().uuidString).log"))
            return (process, output)
        }

        /// The id of the request waiting at `label`, once there is one.
        func waitingRequest(at label: String) throws -> String {
            let deadline = Date().addingTimeInterval(20)
            while Date() < deadline {
                let listed = try holders[label].ok("requests")
                if let line = listed.split(separator: "\n").first(where: { $0.contains("'alice' asks for piece") }) {
                    return String(line.prefix(8))
                }
                usleep(100_000)
            }
            throw NSError(domain: "ConsentTests", code: 1, userInfo: [NSLocalizedDescriptionKey: "no request at \(label)"])
        }
    }

    @Test func aPieceWaitsForItsHoldersApproval() throws {
        let s = try Setup()
        let (recovery, output) = try s.recover()
        try recovery.waitFor("waiting for bob to approve request [0-9a-f]{8}")
        let request = try s.waitingRequest(at: "bob")
        // Nothing left Bob's machine yet: the request is listed with who asks and for what.
        let listed = try s.holders["bob"].ok("requests")
        #expect(listed.contains("'alice' asks for piece 2 of note \(s.id.prefix(16)) (the safe)"), "\(listed)")
        #expect(!FileManager.default.fileExists(atPath: output))
        try s.holders["bob"].ok("approve", request)
        #expect(recovery.wait() == 0, "\(recovery.log)")
        #expect(try String(contentsOfFile: output, encoding: .utf8) == "")
        // The release is on record, and the approval is used up.
        let shown = try s.holders["bob"].ok("secrets", "show", s.id)
        #expect(shown.contains("alice (index 1)  approved"), "\(shown)")
        #expect(shown.contains("auto-release nobody"))
        #expect(try s.holders["bob"].fails("approve", request).contains("no single waiting request matches"))
    }

    @Test func aDenialOrSilenceReleasesNothing() throws {
        // Carol's person has 5 s; bob's has time for the steps below on a loaded machine.
        let s = try Setup(consentTimeouts: ["carol": 5])
        // No --timeout: recovery waits while the holders' people decide.
        let (denied, _) = try s.recover()
        try s.holders["bob"].ok("deny", try s.waitingRequest(at: "bob"))
        // Carol never answers: her request times out on her side.
        #expect(denied.wait() == 1)
        #expect(denied.log.contains("bob: refused: the holder denied the request"), "\(denied.log)")
        #expect(denied.log.contains("carol: refused: the holder did not approve in time"), "\(denied.log)")
        #expect(try s.holders["bob"].ok("secrets", "show", s.id).contains("alice (index 1)  denied"))
        #expect(try s.holders["carol"].ok("secrets", "show", s.id).contains("alice (index 1)  timed out"))
    }

    @Test func automaticReleaseIsAnExplicitOptIn() throws {
        let s = try Setup()
        try s.holders["bob"].ok("secrets", "auto-release", s.id, "--for", "alice")
        #expect(try s.holders["bob"].ok("secrets", "show", s.id).contains("auto-release alice"))
        let (fast, output) = try s.recover()
        #expect(fast.wait() == 0, "\(fast.log)")
        #expect(FileManager.default.fileExists(atPath: output))
        #expect(try s.holders["bob"].ok("secrets", "show", s.id).contains("alice (index 1)  automatic"))
        #expect(try s.holders["bob"].ok("requests").isEmpty)
        // Off again: the next request waits.
        try s.holders["bob"].ok("secrets", "auto-release", s.id, "--for", "alice", "--off")
        let (slow, _) = try s.recover()
        _ = try s.waitingRequest(at: "bob")
        slow.stop()
    }

    /// A question waiting on serve's terminal holds up nothing else: not its log, not `vault
    /// approve` from another shell, not its exit on SIGTERM. (A prompt once held the lock
    /// every stderr line takes, so the agent's answer to `vault approve` never came and
    /// serve could not stop.)
    @Test func aQuestionOnServesTerminalBlocksNothingElse() throws {
        let h = try SharedKeyTests.Holders(["alice", "bob"], serving: [], autoRelease: false)
        let id = try h.circle.share(from: "alice", ["-", "--to", "bob", "-k", "2"])
        let serve = try h["bob"].vault.onTerminal(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"])
        try serve.expect("agent listening on")
        try serve.expect("as 'bob' (fingerprint ")
        let port = try #require(serve.transcript.firstMatch(of: /listening on 127\.0\.0\.1:(\d+)/)?.1)
        let recovery = try h["alice"].vault.background(["recover", id, "-o", h.circle.files.file("out"), "--peer", "bob=127.0.0.1:\(port)"],
                                                       log: h.circle.files.file("recover.log"))
        try serve.expect("(request ")
        try serve.expect("? [y/N] ")
        let request = try recovery.waitFor("waiting for bob to approve request ([0-9a-f]{8})")
        // Answered from another shell while the question waits on the terminal.
        let approved = try h["bob"].vault.run("approve", request)
        #expect(approved.status == 0, "\(approved.stderr)")
        #expect(recovery.wait() == 0, "\(recovery.log)")
        try serve.expect("vault serve: approved request \(request)")
        serve.signal(SIGTERM)
        try serve.expect("vault serve: stopped", timeout: 10)
        #expect(serve.finish().status == 0)
    }

    /// Issue 47: a log line printed while a question waited left the question scrolled away.
    /// The question is shown again below the line: here bob's question about the first
    /// secret comes back after the log line of a request for the second.
    @Test func aLogLineShowsTheOpenQuestionAgainBelowIt() throws {
        let h = try SharedKeyTests.Holders(["alice", "bob"], serving: [], autoRelease: false)
        let first = try h.circle.share(from: "alice", ["-", "--to", "bob", "-k", "2"])
        let second = try h.circle.share(from: "alice", ["-", "--to", "bob", "-k", "2"])
        let serve = try h["bob"].vault.onTerminal(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"])
        try serve.expect("as 'bob' (fingerprint ")
        let port = try #require(serve.transcript.firstMatch(of: /listening on 127\.0\.0\.1:(\d+)/)?.1)
        func recover(_ id: String) throws -> BackgroundProcess {
            try h["alice"].vault.background(["recover", id, "-o", h.circle.files.file("out-\(UUID().uuidString)"), "--peer", "bob=127.0.0.1:\(port)"],
                                            log: h.circle.files.file("recover-\(UUID().uuidString).log"))
        }
        let one = try recover(first)
        let asked = try one.waitFor("waiting for bob to approve request ([0-9a-f]{8})")
        let question = "Release your piece of \(first.prefix(16)) to 'alice' (request \(asked))? [y/N] "
        try serve.expect(question)
        let two = try recover(second)
        let other = try two.waitFor("waiting for bob to approve request ([0-9a-f]{8})")
        try serve.expect("release request \(other): ")
        try serve.expect(question, times: 2)
        let after = try #require(serve.transcript.range(of: "release request \(other): "))
        #expect(serve.transcript[after.upperBound...].contains(question), "\(serve.transcript)")
        serve.send("y")
        #expect(one.wait() == 0, "\(one.log)")
        serve.signal(SIGTERM)
        _ = two.wait()
        _ = serve.finish()
    }

    /// Issue 32: a question on serve's terminal whose request was answered elsewhere is
    /// withdrawn, and the next request gets a question of its own, which the next answer
    /// typed decides. (The old question stayed, the next requests got none, and a "y" went to
    /// the finished request.)
    @Test func aQuestionAnsweredElsewhereIsWithdrawn() throws {
        let h = try SharedKeyTests.Holders(["alice", "bob"], serving: [], autoRelease: false)
        let id = try h.circle.share(from: "alice", ["-", "--to", "bob", "-k", "2"])
        let serve = try h["bob"].vault.onTerminal(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"])
        try serve.expect("as 'bob' (fingerprint ")
        let port = try #require(serve.transcript.firstMatch(of: /listening on 127\.0\.0\.1:(\d+)/)?.1)
        func recover() throws -> BackgroundProcess {
            try h["alice"].vault.background(["recover", id, "-o", h.circle.files.file("out-\(UUID().uuidString)"), "--peer", "bob=127.0.0.1:\(port)"],
                                            log: h.circle.files.file("recover-\(UUID().uuidString).log"))
        }
        let first = try recover()
        let request = try first.waitFor("waiting for bob to approve request ([0-9a-f]{8})")
        try serve.expect("(request \(request))? [y/N] ")
        try h["bob"].ok("approve", request)
        #expect(first.wait() == 0, "\(first.log)")
        try serve.expect("(answered elsewhere)")

        let second = try recover()
        let next = try second.waitFor("waiting for bob to approve request ([0-9a-f]{8})")
        try serve.expect("(request \(next))? [y/N] ", timeout: 10)
        serve.send("y")
        #expect(second.wait() == 0, "\(second.log)")
        try serve.expect("vault serve: approved request \(next)")
        serve.signal(SIGTERM)
        try serve.expect("vault serve: stopped", timeout: 10)
        #expect(serve.finish().status == 0)
    }

    /// Issue 32: `--timeout` bounds the whole wait, also while a holder asks its person
    /// (it once waited out serve's two-minute consent window).
    @Test func timeoutBoundsTheWholeWait() throws {
        let s = try Setup()
        let started = Date()
        let (recovery, _) = try s.recover(["--timeout", "3"])
        try recovery.waitFor("waiting for bob to approve request [0-9a-f]{8}")
        #expect(recovery.wait() == 1, "\(recovery.log)")
        #expect(recovery.log.contains("no more answers within 3 s"), "\(recovery.log)")
        // Far below the 120 s a holder waits for consent, whatever the machine's load.
        #expect(Date().timeIntervalSince(started) < 60)
    }

    /// Without a serve, the queue holds only what came through relays (issue 33): the
    /// listing says that LAN requests need a serve, and an unknown id matches nothing.
    @Test func withoutAServeTheQueueHoldsWhatCameThroughRelays() throws {
        let user = try User().initialize("dave")
        let listed = try user.vault.run("requests")
        #expect(listed.status == 0 && listed.stdout.isEmpty, "\(listed.stderr)")
        #expect(listed.stderr.contains("no requests wait for your consent (no 'vault serve' runs: requests over the LAN need one)"))
        #expect(try user.fails("approve", "abcd1234").contains("no single waiting request matches abcd1234"))
    }

    /// `vault unlock` goes through the same consent: the key is recovered only once another
    /// holder approves (issue 14: "unlocking a shared key needs the other holders' approval").
    @Test func unlockingASharedKeyNeedsAnotherHoldersApproval() throws {
        let h = try SharedKeyTests.Holders(["alice", "bob"], serving: ["alice", "bob"], autoRelease: false)
        defer { h.stopAll() }
        try h.ok("alice", ["key", "create", "family", "--to", "bob", "-k", "2"])
        let unlock = try h["alice"].vault.background(["unlock", "family", "--peer", "bob=\(h.servers["bob"]!.address)"],
                                                     log: h.circle.files.file("unlock.log"))
        try unlock.waitFor("waiting for bob to approve request ([0-9a-f]{8})")
        #expect(try h["alice"].ok("keys", "list").contains("locked"))
        let request = try unlock.waitFor("request ([0-9a-f]{8})")
        try h["bob"].ok("approve", request)
        #expect(unlock.wait() == 0, "\(unlock.log)")
        #expect(try h["alice"].ok("keys", "list").contains("unlocked until"))
    }
}
