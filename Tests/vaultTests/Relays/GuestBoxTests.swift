import Foundation
import Testing
@testable import VaultCore
@testable import VaultHolders
@testable import VaultRelayClient
import VaultTestSupport

/// Social recovery with no new group (issue 47): the new machine pins one relay its owner's
/// friends use and asks them through the guest box (Docs/RELAY.md, "The guest box"); and the
/// rules that keep the guest box from being an open mailbox, on SQLite and PostgreSQL.
@Suite struct GuestBoxTests {
    /// Alice's laptop is gone. Bob and carol, who run only `vault serve`, exchange cards with
    /// her new machine face to face; it pins one relay and asks. Four commands after the card
    /// exchange, nothing carried by hand but the cards, the relay's URL and what names the
    /// secret; no group is made, and no relay operator is asked for anything.
    @Test func aNewMachineRecoversThroughOneRelayWithNoGroup() throws {
        let w = try HoldersWorld(["alice", "bob", "carol"])
        let id = try w.share("passport 123", with: ["bob", "carol"])
        let dealer = String(try w["alice"].card().split(separator: "#")[0])
        try w.serve("bob")
        try w.serve("carol")
        // The card exchange, face to face.
        let new = User("alice-new")
        _ = try new.initialize("alice-new")
        for holder in ["bob", "carol"] {
            try new.ok("peer", "add", try w[holder].card(), "--label", holder, "--yes")
            try w[holder].ok("peer", "add", try new.card(), "--label", "alice-new", "--yes")
        }
        // 1: one relay; 2: the recovery, waiting.
        try new.ok("relay", "add", "r1", w.urls[0], "--yes")
        let recovery = try new.vault.background(["recover", id, "--dealer", dealer, "--from", "bob,carol", "--wait", "--timeout", "120"],
                                                log: w.directory.file("guest.log"))
        try recovery.waitFor("carol: asked through your relays, as a guest", timeout: 60)
        #expect(recovery.log.contains("bob: asked through your relays, as a guest (no group shared)"), "\(recovery.log)")
        // Each holder's serve took the request off the relay it reads: it says whose secret
        // it is, and that it came from a guest.
        let bobs = try w.request(at: "bob", from: "alice-new")
        let listed = try w["bob"].ok("requests")
        #expect(listed.contains("'alice-new' asks for piece 2 of alice's note \(id.prefix(16)) (boat), relays, as a guest in no group of yours"),
                "\(listed)")
        // 3 and 4: the holders approve.
        try w["bob"].ok("approve", bobs, "--confirm-dealer", "alice")
        try w["carol"].ok("approve", try w.request(at: "carol", from: "alice-new"), "--confirm-dealer", "alice")
        #expect(recovery.wait() == 0, "\(recovery.log)")
        #expect(recovery.log.contains("recovered note \(id.prefix(16)) from pieces 2, 3"), "\(recovery.log)")
    }

    /// The guest box's rules, through the SQLite relays of a world.
    @Test func theGuestBoxIsNoOpenMailboxOnSQLite() async throws {
        let w = try HoldersWorld(["alice", "bob"])
        try await Self.checkRules(relay: w.urls[0], member: w["bob"], directory: w.directory)
    }

    /// The same rules in PostgreSQL, where two processes share one store.
    @Test func theGuestBoxIsNoOpenMailboxOnPostgreSQL() async throws {
        let world = try PostgresWorld()
        try await Self.checkRules(relay: world.frontURL, member: world.bob, directory: world.directory)
        // Listed and counted like any message, with no owner: the guest box's bytes are in
        // the total, and in no owner's quota.
        #expect(try world.cluster.sql("SELECT count(*) > 0 FROM relay_messages WHERE group_id = '\\x00000000000000000000000000000000'") == "t")
        #expect(try world.cluster.sql("""
            SELECT (SELECT bytes FROM relay_usage WHERE scope = ''::BYTEA)
                 = (SELECT COALESCE(SUM(size), 0) FROM relay_messages WHERE ready < 2) + (SELECT SUM(length(record)) FROM relay_groups)
            """) == "t")
    }

    /// A stranger to the relay (a key in no group there) may send to a member, not to another
    /// stranger; only holder messages to one recipient; at most 16 waiting from one key; and
    /// no group record may take the guest box's id. The member's vault drops what an
    /// untrusted card left, which frees its box.
    static func checkRules(relay url: String, member: User, directory: TemporaryDirectory) async throws {
        let stranger = User("stranger"), other = User("other")
        for user in [stranger, other] {
            _ = try user.initialize(user === stranger ? "stranger" : "other")
            try user.ok("relay", "add", "r", url, "--yes")
        }
        let keystore = try Keystore.open(home: VaultHome(directory: stranger.vault.home))
        let identity = try keystore.unlock(passphrase: nil)
        let box = try #require(HolderMail.guestBox(keystore: keystore, identity: identity))
        #expect(box.isGuestBox && box.relays.count == 1)
        let memberCard = try KeyCard(text: try member.card()), otherCard = try KeyCard(text: try other.card())
        func send(to card: KeyCard) async throws -> Messenger.Stored {
            try await OwnThread.run {
                try await HolderMail.send(to: card, in: box, lifetime: 3600, keystore: keystore, identity: identity) { emit in
                    try HolderRecord.withdrawal(nonce: SecureRandom().bytes(16)).withUnsafeBytes(emit)
                }
            }
        }
        let connection = RelayConnection(box.relays[0], identity: identity)
        // Stranger to stranger: refused, in words.
        let refused = try await send(to: otherCard)
        #expect(refused.count == 0 && refused.why.contains("the guest box carries messages to or from a member of a group on this relay only"),
                "\(refused.why)")
        // To a member: stored, up to 16 waiting from one key.
        for _ in 0..<16 {  // GuestBoxLimits.perSender
            let stored = try await send(to: memberCard)
            #expect(stored.count == 1, "\(stored.why)")
        }
        let full = try await send(to: memberCard)
        #expect(full.count == 0 && full.why.contains("this key has 16 messages waiting in the guest box here"), "\(full.why)")
        // Now a guest, it may hold a waiting list (in the guests' slots), for the answers.
        let waited = ProcessInfo.processInfo.systemUptime
        _ = try await OwnThread.run { try await connection.messages(after: Int64.max - 1, wait: 2) }
        #expect(ProcessInfo.processInfo.systemUptime - waited >= 1.5, "a guest's waiting list was answered at once")
        // The member's vault reads its guest box and drops what a card it does not trust
        // left, saying so once: the stranger may send again.
        let dropped = try member.vault.run("receive")
        #expect(dropped.stderr.contains("dropped 16 messages from cards you do not trust in your relays' guest box"), "\(dropped.stderr)")
        #expect(try await send(to: memberCard).count == 1)
        // Kept messages (left for a recipient's other machines) are not for the guest box.
        let kept = try await OwnThread.run {
            try await HolderMail.send(to: memberCard, in: box, lifetime: 3600, kept: true, keystore: keystore, identity: identity) { emit in
                try HolderRecord.withdrawal(nonce: SecureRandom().bytes(16)).withUnsafeBytes(emit)
            }
        }
        #expect(kept.count == 0 && kept.why.contains("a message to the guest box is deleted once its recipient confirms it"), "\(kept.why)")
        // A stranger's message is small: a large one (as a share offer would be) is refused.
        let large = try await OwnThread.run {
            try await HolderMail.send(to: memberCard, in: box, lifetime: 3600, keystore: keystore, identity: identity) { emit in
                try HolderRecord.shareOffer().withUnsafeBytes(emit)
                try [UInt8](repeating: 7, count: 20_000).withUnsafeBytes(emit)
            }
        }
        #expect(large.count == 0 && large.why.contains("a key in no group here sends at most 16 KiB to the guest box"), "\(large.why)")
        // Item changes are no holder message: the guest box refuses them.
        let changes = ObjectMessage.Request(groupID: GroupRecord.guestBoxID, kind: .changes, keyID: SecureRandom().bytes(16),
                                            recipients: [memberCard], lifetime: 3600, deleteWhenConfirmed: true)
        let notHolder = try await OwnThread.run {
            try await ObjectSync.send(changes, group: box, keystore: keystore, identity: identity) { _ in }
        }
        #expect(notHolder.count == 0 && notHolder.why.contains("the guest box takes holder messages to one recipient only"), "\(notHolder.why)")
        // No group record may take the guest box's id.
        let squatter = try GroupRecord(id: GroupRecord.guestBoxID, version: 1, name: Label("guests"), owner: identity.card,
                                       relays: box.relays + [.init(name: Label("x"), url: "http://127.0.0.1:9", card: otherCard)], members: [.init(label: Label("me"), card: identity.card)],
                                       signer: identity)
        let (status, body) = try await OwnThread.run {
            try await connection.send(.PUT, "/v1/groups/\(GroupRecord.guestBoxID.hex)", body: squatter.encoded)
        }
        #expect(status == 400 && String(decoding: body, as: UTF8.self).contains("its id is the guest box's, 16 zero bytes"),
                "\(status) \(String(decoding: body, as: UTF8.self))")
    }
}
