import Foundation
import Testing
@testable import VaultCore
@testable import VaultHolders
@testable import VaultRelayClient
import VaultTestSupport

/// The owner's `vault deny` always wins (findings H1 and H2 of this round's security
/// review, Docs/SECURITY.md), through the built binary with three relays on loopback and no
/// serve anywhere: each holder answers at its next `vault receive`, as Docs/CLI.md says.
@Suite(.serialized) struct OwnerDenialTests {
    /// H1: dave asks; bob and carol take the request (the wait starts); alice denies long
    /// before it ends. After it ended, each holder first lists its requests (which once
    /// released the wait), then receives: the denial cancels, nobody releases, and dave's
    /// next recovery fails.
    @Test func aDenialStoredBeforeTheWaitEndsWinsAfterIt() throws {
        let w = try HoldersWorld(["alice", "bob", "carol", "dave"])
        let wait: TimeInterval = 20
        let id = try w.shareWithEmergency("passport 123", wait: "\(Int(wait))s")
        try w["alice"].ok("receive")
        #expect(try w.daveRecovers(id, ["--ttl", "1h"]).status == 75)
        for holder in ["bob", "carol"] {
            let taken = try w[holder].vault.run("receive")
            #expect(taken.stderr.contains("emergency request") && taken.stderr.contains("dave asks for emergency access"), "\(taken.stderr)")
        }
        // The waits began when the holders took the request, by now.
        let started = Date()
        let request = try w.request(at: "alice", containing: "dave asks for emergency access")
        let denied = try w["alice"].vault.run("deny", request)
        #expect(denied.status == 0, "\(denied.stderr)")
        #expect(Date().timeIntervalSince(started) < wait, "the wait ended before the denial: the test machine is too slow")

        // The holders' clocks (the world's) pass the release time.
        w.clock.advance(by: wait + 1)
        for holder in ["bob", "carol"] {
            // `vault requests` reads the relays too (no serve runs), and says what it took.
            let listed = try w[holder].vault.run("requests")
            let received = try w[holder].vault.run("receive")
            #expect((listed.stderr + received.stderr).contains("'alice' denied dave's emergency access: cancelled here"),
                    "\(holder): \(listed.stderr) \(received.stderr)")
            let shown = try w[holder].ok("secrets", "show", id)
            #expect(shown.contains("dave (index 0)  denied by the dealer"), "\(shown)")
            #expect(!shown.contains("dave (index 0)  released"), "\(shown)")
        }
        let again = try w.daveRecovers(id)
        #expect(again.status == 1, "\(again.stderr)")
        #expect(!again.stdout.contains("passport 123"))
    }

    /// H2: dave chooses his requests' reply keys, and once found two whose plain hashes
    /// alice used as one id: `vault deny ID` matched neither. Here his two requests carry
    /// such a pair: alice names them apart, `vault deny dave` denies every open request of
    /// his, and the holder whose first request was replaced tells alice so.
    @Test func theTrusteeCannotNameTwoRequestsAlike() async throws {
        let w = try HoldersWorld(["alice", "bob", "carol", "dave"])
        let id = try w.shareWithEmergency("passport 123", wait: "1h")
        try w["alice"].ok("receive")
        let (first, second) = Self.collidingReplyKeys()
        let daves = try Keystore.open(home: VaultHome(directory: w["dave"].vault.home))
        let dave = try daves.unlock(passphrase: nil)
        let dealer = try KeyCard(text: try w.aliceCard()), secretID = try #require([UInt8](hexID: id))
        let group = try daves.group(named: "friends")
        func ask(_ holder: String, replyKey: [UInt8]) async throws {
            let peer = try daves.peer(named: holder)
            let request = try RelayPieceRequest.make(secretID: secretID, dealer: dealer, holder: peer.card, own: nil, identity: dave,
                                                     replyKey: replyKey, lifetime: 7200)
            let stored = try await OwnThread.run {
                try await HolderMail.send(to: peer.card, in: group, lifetime: 7200, keystore: daves, identity: dave) { emit in
                    try HolderRecord.pieceRequest(request).withUnsafeBytes(emit)
                }
            }
            #expect(stored.count == 3, "\(stored.why)")
        }
        try await ask("bob", replyKey: first)
        try await ask("carol", replyKey: first)
        for holder in ["bob", "carol"] { try w[holder].ok("receive") }
        // The second request reaches bob only: carol still waits on the first.
        try await ask("bob", replyKey: second)
        try w["bob"].ok("receive")

        let told = try w["alice"].vault.run("receive")
        #expect(told.stderr.contains("dave asked again: emergency request"), "\(told.stderr)")
        let listed = try w["alice"].ok("requests").split(separator: "\n").filter { $0.contains("dave asks for emergency access") }
        #expect(listed.count == 2, "\(listed)")
        #expect(Set(listed.map { $0.prefix(8) }).count == 2, "two requests share an id: \(listed)")
        let denied = try w["alice"].vault.run("deny", "dave")
        #expect(denied.status == 0, "\(denied.stderr)")
        for line in listed {
            #expect(denied.stderr.contains("denied dave's emergency access to 'passport' (request \(line.prefix(8)))"), "\(denied.stderr)")
        }
        // The holders told are said once, on one line (issue 47: a line a holder before).
        #expect(denied.stderr.components(separatedBy: "that you denied dave's emergency access").count == 2, "\(denied.stderr)")
        #expect(denied.stderr.contains("told 'bob', 'carol' that you denied dave's emergency access"), "\(denied.stderr)")
        #expect(!(try w["alice"].ok("requests")).contains("dave asks"))
        for holder in ["bob", "carol"] {
            let received = try w[holder].vault.run("receive")
            #expect(received.stderr.contains("'alice' denied dave's emergency access: cancelled here"), "\(holder): \(received.stderr)")
        }
    }

    /// Two reply keys whose plain hash (the id alice once gave a request) is the same: a
    /// birthday search over 32 bits, about 2^16 keys, as the review's 5.8 s took.
    static func collidingReplyKeys() -> ([UInt8], [UInt8]) {
        var seen: [[UInt8]: [UInt8]] = [:]
        while true {
            let key = ReplyKey().publicKey
            let name = Sodium.blake2b(outputLength: 4, key: "vault/v1/emergency-id", key)
            if let other = seen[name], other != key { return (other, key) }
            seen[name] = key
        }
    }
}
