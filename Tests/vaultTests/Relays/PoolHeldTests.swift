import Foundation
import Testing
@testable import VaultCore
@testable import VaultRelayClient
import VaultTestSupport

/// A program that embeds vault's relay client and keeps Swift's shared pool busy does not
/// hold vault's relay traffic (an app of Grouper's, or a test run of synchronous tests): a
/// message of at most one chunk goes out as bytes, not pulled by a task of AsyncHTTPClient's
/// own on that pool. Run in a process of its own (scripts/test): among other tests the pool
/// is held already, and its threads come free only as those tests end.
@Suite(.serialized) struct PoolHeldTests {
    /// alice sends bob a holder message while every thread of the pool is held. Streamed, it
    /// sat until the relays gave up on its body (30 s) and none stored it.
    @Test func aSmallMessageIsStoredWhileThePoolIsHeld() async throws {
        let world = try RelayWorld()
        let keystore = try Keystore.open(home: VaultHome.resolve(explicit: world.alice.directory.file("home")))
        let identity = try keystore.unlock(passphrase: nil)
        let group = try keystore.group(named: "team"), bob = try keystore.peer(named: "bob")
        let clock = ContinuousClock(), start = clock.now
        let (stored, held) = try await OwnThread.runHoldingThePool(limit: 45) {
            try await HolderMail.send(to: bob.card, in: group, lifetime: 600, keystore: keystore, identity: identity) { emit in
                try [UInt8](repeating: 7, count: 300).withUnsafeBytes(emit)
            }
        }
        #expect(held, "the pool was not held throughout (a task ran there), or the send outlasted the hold: \(clock.now - start)")
        #expect(stored.count == 3, "\(stored.why)")
    }

    /// The same for a small share link: its blob was streamed too, and its creation sat
    /// until the relay gave up on the body.
    @Test func aSmallLinkIsCreatedWhileThePoolIsHeld() async throws {
        let world = try RelayWorld()
        let keystore = try Keystore.open(home: VaultHome.resolve(explicit: world.alice.directory.file("home")))
        let relay = try #require(try keystore.pinnedRelays().first)
        let clock = ContinuousClock(), start = clock.now
        let (created, held) = try await OwnThread.runHoldingThePool(limit: 45) {
            var note = BytesSource(Array("meet at noon".utf8))
            return try await LinkClient.create(&note, meta: try LinkMeta(kind: .note, name: nil), relay: relay, lifetime: 600, views: 1,
                                               password: nil, home: keystore.home)
        }
        #expect(held, "the pool was not held throughout (a task ran there), or the creation outlasted the hold: \(clock.now - start)")
        #expect(created.size > 0 && created.text.hasPrefix(relay.url + "/s/"))
    }
}
