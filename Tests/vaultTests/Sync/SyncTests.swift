import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import GRDB
import Testing
import VaultCore
import VaultRelayProtocol
import VaultTestSupport

/// Issue 17 against real processes on loopback: alice, bob and carol hold key 'family' (2
/// of 3) and run `vault serve`; dave is a trusted member of their group who holds no share
/// of it. The group has three relays.
final class SyncWorld {
    let holders: SharedKeyTests.Holders
    let directory = TemporaryDirectory("vault-sync-relays")
    var relays: [BackgroundProcess] = []
    var urls: [String] = []
    let labels = ["alice", "bob", "carol", "dave"]

    init() throws {
        holders = try SharedKeyTests.Holders(labels, serving: ["alice", "bob", "carol"])
        for i in 1...3 {
            let relay = try BackgroundProcess(VaultBinary.path, ["relay", "serve", "--listen", "127.0.0.1:0", "--sweep-interval", "3600",
                                                                 "--store", "sqlite:" + directory.file("r\(i).db")],
                                              environment: [:], logPath: directory.file("r\(i).log"))
            _ = try relay.waitFor("fingerprint ")
            let line = relay.log.split(separator: "\n").first { $0.contains("listening on ") } ?? ""
            urls.append(String(line.split(separator: " ").last ?? ""))
            relays.append(relay)
        }
        for (i, url) in urls.enumerated() { try ok("alice", "relay", "add", "r\(i + 1)", url, "--yes") }
        for label in labels.dropFirst() { try ok(label, "relay", "add", "r1", urls[0], "--yes") }
        try ok("alice", "group", "create", "team", "--relays", "r1,r2,r3", "--members", "bob,carol,dave")
        try holders.ok("alice", ["key", "create", "family", "--to", "bob,carol", "-k", "2", "--group", "team"])
        try ok("alice", "unlock", "family")
        let keys = try JSONSerialization.jsonObject(with: Data(try holders.ok("alice", ["keys", "list", "--json"]).utf8)) as? [[String: Any]]
        keyID = keys?.first?["keyID"] as? String ?? ""
    }

    /// The key's id: a received key has no name until its holder gives it one.
    var keyID = ""

    deinit {
        holders.stopAll()
        for relay in relays { _ = relay.stop(SIGKILL) }
    }

    @discardableResult
    func ok(_ label: String, _ arguments: String..., stdin: String = "", sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        try holders.ok(label, arguments, stdin: stdin, sourceLocation: sourceLocation)
    }

    func run(_ label: String, _ arguments: String..., stdin: String = "") throws -> ProcessResult {
        try holders.run(label, arguments, stdin: stdin)
    }

    /// `vault item list --json` of `label`, by id.
    func items(_ label: String) throws -> [String: [String: Any]] {
        let list = try JSONSerialization.jsonObject(with: Data(try ok(label, "item", "list", "--json").utf8)) as? [[String: Any]] ?? []
        return Dictionary(uniqueKeysWithValues: list.map { ($0["id"] as! String, $0) })
    }

    /// Each holder's items as id, version and content: what must converge.
    func state(_ label: String) throws -> [String] {
        try items(label).keys.sorted().map { id in
            "\(id) \(try items(label)[id]!["version"] as? String ?? "-") \(try ok(label, "item", "show", id))"
        }
    }

    func database(_ i: Int) throws -> DatabaseQueue { try DatabaseQueue.beside(directory.file("r\(i).db")) }

    /// Relay `i`'s messages, as rows of its tables.
    func saveMessages(relay i: Int) throws -> [String: [[DatabaseValue]]] {
        try database(i).read { db in
            var saved: [String: [[DatabaseValue]]] = [:]
            for table in ["messages", "chunks", "recipients"] {
                saved[table] = try Row.fetchAll(db, sql: "SELECT * FROM \(table)").map { Array($0.databaseValues) }
            }
            return saved
        }
    }

    /// Puts `saved` back on relay `i`, every recipient unconfirmed: the relay serves it again.
    func restore(_ saved: [String: [[DatabaseValue]]], relay i: Int) throws {
        try database(i).write { db in
            for table in ["messages", "chunks", "recipients"] {
                for values in saved[table] ?? [] {
                    let marks = Array(repeating: "?", count: values.count).joined(separator: ", ")
                    try db.execute(sql: "INSERT OR REPLACE INTO \(table) VALUES (\(marks))", arguments: StatementArguments(values))
                }
            }
            try db.execute(sql: "UPDATE recipients SET confirmed = 0")
            try db.execute(sql: "UPDATE messages SET ready = 1")
        }
    }

    /// Zeroes the last 16 bytes of every message chunk relay `i` holds.
    func damageMessages(relay i: Int) throws {
        // The body's end only: the signed header still reads as an object message's.
        try database(i).write { db in
            try db.execute(sql: "UPDATE chunks SET bytes = substr(bytes, 1, length(bytes) - 16) || zeroblob(16)")
        }
    }

    /// Empties every relay, as if each message had outlived its TTL.
    func forgetAllMessages() throws {
        for i in 1...3 { try database(i).write { db in try db.execute(sql: "DELETE FROM messages") } }
    }
}

@Suite(.serialized) struct SyncTests {
    /// The README's step: alice's Wi-Fi item reaches bob (unopened while his key is locked,
    /// opened once he unlocks it); alice edits it and bob's sync shows the new one; bob
    /// deletes it and it goes from alice's machine; carol, away while the relays forgot all
    /// of it, catches up with `sync --full`, and everyone holds the same items.
    @Test func editsAndDeletesReachEveryHolder() throws {
        let world = try SyncWorld()
        let wifi = SharedKeyTests.id(try world.ok("alice", "item", "add", "--key", "family", "--title", "wifi", stdin: "wifi: hunter2"))
        let keep = SharedKeyTests.id(try world.ok("alice", "item", "add", "--key", "family", "--title", "alarm", stdin: "alarm: 1234"))
        let sent = try world.run("alice", "sync")
        #expect(sent.stderr.contains("sent 2 changes to 'family' through 3 relays"), "\(sent.stderr)")

        let received = try world.run("bob", "receive")
        #expect(received.status == 0, "\(received.stderr)")
        #expect(received.stderr.contains("key '\(world.keyID.prefix(16))' now syncs"), "\(received.stderr)")
        #expect(received.stderr.contains("applied 2 changes"), "\(received.stderr)")
        #expect(try world.items("bob")[wifi]?["unopened"] as? Bool == true)
        let unlocked = try world.run("bob", "unlock", world.keyID)
        #expect(unlocked.stderr.contains("opened 2 items received while the key was locked"), "\(unlocked.stderr)")
        #expect(try world.ok("bob", "item", "show", wifi) == "wifi: hunter2")

        // alice edits; bob's sync shows the new one, same id, a later version by alice.
        try world.ok("alice", "item", "edit", wifi, "-", stdin: "wifi: correct horse")
        try world.ok("alice", "sync")
        #expect(try world.run("bob", "sync").stderr.contains("applied 1 change"))
        #expect(try world.ok("bob", "item", "show", wifi) == "wifi: correct horse")
        let edited = try #require(try world.items("bob")[wifi])
        #expect(edited["author"] as? String == "alice" && (edited["version"] as? String)?.hasPrefix("3.") == true, "\(edited)")

        // bob deletes; alice's copy goes at her next sync.
        try world.ok("bob", "item", "rm", wifi, "--yes")
        try world.ok("bob", "sync")
        try world.ok("alice", "sync")
        #expect(try world.items("alice")[wifi] == nil)
        #expect(try world.items("alice")[keep] != nil)

        // carol was away longer than the relays keep changes: they forgot everything.
        try world.forgetAllMessages()
        try world.ok("carol", "receive")
        #expect(try world.items("carol").isEmpty)
        try world.holders["carol"].ok("key", "sync", world.keyID, "--group", "team")
        let asked = try world.run("carol", "sync", "--full")
        #expect(asked.stderr.contains("asked the other holders of '\(world.keyID.prefix(16))' for its whole state"), "\(asked.stderr)")
        #expect(try world.run("alice", "sync").stderr.contains("sent the state of 'family' to carol, as asked"))
        try world.ok("carol", "unlock", world.keyID)
        try world.ok("carol", "sync")
        #expect(try world.state("carol") == world.state("alice"))
        #expect(try world.state("bob") == world.state("alice"))
        // The deletion came too: carol's history names all three versions of the Wi-Fi item.
        let history = try world.ok("carol", "item", "history", wifi)
        #expect(history.split(separator: "\n").count == 3 && history.contains("delete") && history.contains("current"), "\(history)")
    }

    /// Alice and bob edit one item without seeing each other's edit: both machines keep the
    /// later version as the item and the other as a conflict copy; bob drops the copy and
    /// alice's machine drops it too.
    @Test func concurrentEditsKeepAConflictCopy() throws {
        let world = try SyncWorld()
        let note = SharedKeyTests.id(try world.ok("alice", "item", "add", "--key", "family", stdin: "v1"))
        try world.ok("alice", "sync")
        try world.ok("bob", "unlock", world.keyID)
        try world.ok("bob", "receive")
        try world.ok("alice", "item", "edit", note, "-", stdin: "alice's v2")
        try world.ok("bob", "item", "edit", note, "-", stdin: "bob's v2")
        try world.ok("alice", "sync")
        let bob = try world.run("bob", "sync")
        #expect(bob.stderr.contains("applied 1 change (1 conflict copy kept: see 'vault item list')"), "\(bob.stderr)")
        try world.ok("alice", "sync")
        #expect(try world.state("alice") == world.state("bob"))
        let items = try world.items("bob")
        #expect(items.count == 2)
        let copy = try #require(items.values.first { $0["conflict"] as? Bool == true })
        #expect(try world.ok("bob", "item", "list").contains("CONFLICT"))
        #expect(Set([try world.ok("bob", "item", "show", note), try world.ok("bob", "item", "show", copy["id"] as! String)])
                == ["alice's v2", "bob's v2"])
        try world.ok("bob", "item", "rm", copy["id"] as! String, "--yes")
        try world.ok("bob", "sync")
        try world.ok("alice", "sync")
        #expect(try world.items("alice").count == 1)
        #expect(try world.state("alice") == world.state("bob"))
    }

    /// Alice's edit P fails to reach enough relays; Bob, who got it anyway, replaces it with
    /// R, which Alice applies before she sends P again. Every other copy gone from the
    /// relays, Carol gets only Alice's message: R must come with P (P's content is gone at
    /// Alice's), or Carol would keep the version P replaced.
    @Test func aPutReplacedBeforeItWasSentGoesWithWhatReplacedIt() throws {
        let world = try SyncWorld()
        let note = SharedKeyTests.id(try world.ok("alice", "item", "add", "--key", "family", stdin: "v1"))
        try world.ok("alice", "sync")
        for label in ["bob", "carol"] {
            try world.ok(label, "unlock", world.keyID)
            try world.ok(label, "receive")
        }
        try world.holders["alice"].ok("key", "sync", world.keyID, "--group", "team", "--min-relays", "3")
        _ = world.relays[2].stop(SIGKILL)
        try world.ok("alice", "item", "edit", note, "-", stdin: "alice's v2")
        #expect(try world.run("alice", "sync").stderr.contains("only 2 of the 3 relays needed stored the changes"))
        try world.ok("bob", "receive")
        #expect(try world.ok("bob", "item", "show", note) == "alice's v2")
        try world.ok("bob", "item", "edit", note, "-", stdin: "bob's v3")
        try world.ok("bob", "sync")
        try world.holders["alice"].ok("key", "sync", world.keyID, "--group", "team", "--min-relays", "2")
        #expect(try world.run("alice", "sync").stderr.contains("sent 1 change"))
        #expect(try world.ok("alice", "item", "show", note) == "bob's v3")
        for i in 1...2 {
            try world.database(i).write { db in try db.execute(sql: "DELETE FROM messages WHERE row < (SELECT max(row) FROM messages)") }
        }
        try world.ok("carol", "sync")
        #expect(try world.state("carol") == world.state("alice"))
        #expect(try world.state("bob") == world.state("alice"))
    }

    /// `vault sync` killed (SIGKILL) at points through applying forty changes: after each
    /// kill the keystore passes SQLite's integrity check and every item row is the content
    /// of a change it knows (no change half applied); a last sync brings every item.
    @Test func killedSyncsLeaveNoHalfAppliedChange() throws {
        let world = try SyncWorld()
        for n in 0..<40 { try world.ok("alice", "item", "add", "--key", "family", "--title", "n\(n)", stdin: String(repeating: "x", count: 5000 + n)) }
        try world.ok("alice", "sync")
        let bob = world.holders["bob"]
        for round in 0..<6 {
            let syncing = try bob.vault.background(["sync"], log: world.directory.file("sync-\(round).log"))
            usleep(useconds_t(150_000 + 120_000 * round))
            _ = syncing.stop(SIGKILL)
            #expect(try CrashSafetyTests.integrity(of: bob) == "ok", "round \(round)")
            let orphans = try DatabaseQueue.beside(bob.vault.home + "/vault.sqlite").read { db in
                try Int.fetchOne(db, sql: """
                    SELECT count(*) FROM item WHERE version_counter IS NOT NULL AND NOT EXISTS (SELECT 1 FROM item_change c
                        WHERE c.counter = item.version_counter AND c.author = item.version_author)
                    """) ?? -1
            }
            #expect(orphans == 0, "round \(round)")
        }
        try world.ok("bob", "sync")
        let versions = { (label: String) in try world.items(label).mapValues { $0["version"] as? String ?? "" } }
        #expect(try versions("bob") == versions("alice"))
        #expect(try world.items("bob").count == 40)
    }

    /// A relay that alters its copy is named and another relay's copy is used; a replay of
    /// an old message by a relay changes nothing; and a change signed by a member who holds
    /// no share of the key is refused, by name, with nothing applied.
    @Test func forgedReplayedAndNonHolderChangesAreRefused() async throws {
        let world = try SyncWorld()
        try world.ok("bob", "unlock", world.keyID)
        let note = SharedKeyTests.id(try world.ok("alice", "item", "add", "--key", "family", stdin: "v1"))
        try world.ok("alice", "sync")
        // Keep relay 2's copy of the first message, to replay it later.
        let saved = try world.saveMessages(relay: 2)
        try world.damageMessages(relay: 1)
        let bob = try world.run("bob", "receive")
        #expect(bob.stderr.contains("relay r1: it served a damaged or forged object message"), "\(bob.stderr)")
        #expect(bob.stderr.contains("applied 1 change"), "\(bob.stderr)")

        try world.ok("alice", "item", "edit", note, "-", stdin: "v2")
        try world.ok("alice", "sync")
        try world.ok("bob", "sync")
        // Relay 2 serves the old message again, as new.
        try world.restore(saved, relay: 2)
        try world.ok("bob", "sync")
        #expect(try world.ok("bob", "item", "show", note) == "v2")

        // dave, a member who holds no share, signs a delete and stores it himself. He has
        // accepted the group first, as his first receive does: a relay takes messages only
        // from members who opted in (issue 37, Docs/RELAY.md "Joining a group").
        _ = try world.ok("dave", "receive")
        let dave = try Keystore.open(home: VaultHome.resolve(explicit: world.holders["dave"].directory.file("home"))).unlock(passphrase: nil)
        let bobCard = try KeyCard(text: try world.holders["bob"].card())
        let keyID = try #require([UInt8](hexID: world.keyID))
        let change = ItemChange(keyID: keyID, itemID: try #require([UInt8](hexID: note)), counter: 99, author: dave.card, operation: .delete,
                                createdAt: 0, supersedes: [], contentLength: 0, contentHash: Array(repeating: 0, count: 32))
        let groupID = try #require([UInt8](hexID: try world.ok("alice", "group", "show", "team").split(separator: "\n")
            .first { $0.hasPrefix("id") }.map { String($0.split(separator: " ").last!) } ?? ""))
        let spool = try Spool(home: VaultHome.resolve(explicit: world.holders["dave"].directory.file("home")))
        let (path, header) = try ObjectMessage.write(.init(groupID: groupID, kind: .changes, keyID: keyID, recipients: [bobCard], lifetime: 3600,
                                                           deleteWhenConfirmed: true), entries: { emit in
            try ObjectEntries.write(record: change.signed(by: dave), content: nil, to: emit)
        }, sender: dave, spool: spool)
        let body = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let relayCard = try KeyCard(text: try #require(String(decoding: try Data(contentsOf: URL(string: world.urls[0] + "/card")!), as: UTF8.self)
            .split(separator: "\"").first { $0.hasPrefix("vault1") }.map(String.init)))
        let target = "/v1/groups/\(groupID.hex)/messages/\(header.messageIDHex)"
        var request = URLRequest(url: URL(string: world.urls[0] + target)!)
        request.httpMethod = "PUT"
        request.httpBody = Data(body)
        for (name, value) in RequestSignature.headers(identity: dave, relay: relayCard.signingKey, method: "PUT", path: target, bodyHash: sha256(body)) {
            request.setValue(value, forHTTPHeaderField: name)
        }
        let status = (try await URLSession.shared.data(for: request).1 as! HTTPURLResponse).statusCode
        #expect(status == 201)
        let refused = try world.run("bob", "sync")
        #expect(refused.stderr.contains("its author does not hold its key") || refused.stderr.contains("does not hold"), "\(refused.stderr)")
        #expect(try world.ok("bob", "item", "show", note) == "v2")
    }
}
