import Foundation
import Testing
import VaultTestSupport

/// `vault app` (issue 36), the local interface for programs in any language, against real
/// relays and serves on loopback (``SyncWorld``: alice, bob and carol hold key 'family',
/// synced through group 'team' on three relays).
@Suite(.serialized) struct AppTests {
    /// `vault app ARGUMENTS` as `label`, for app "shopping-list" on the family key (a
    /// received key has no name: the others give its id).
    static func app(_ world: SyncWorld, _ label: String, _ command: String, _ arguments: String..., stdin: String = "") throws -> ProcessResult {
        try world.holders.run(label, ["app", command, "shopping-list", "--key", label == "alice" ? "family" : world.keyID] + arguments, stdin: stdin)
    }

    static func watchArguments(_ world: SyncWorld) -> [String] {
        ["app", "watch", "shopping-list", "--key", world.keyID, "--json"]
    }

    /// Alice writes item/bread; bob takes the key and starts `vault app watch --json`,
    /// which has printed bread.
    static func bobWatches(_ world: SyncWorld) throws -> BackgroundProcess {
        try #require(try app(world, "alice", "put", "item", "bread", "{}").status == 0)
        try world.ok("bob", "unlock", world.keyID)
        try world.ok("bob", "sync")
        let watch = try world.holders["bob"].vault.background(watchArguments(world), log: world.directory.file("watch.log"))
        try watch.waitFor(#""id":"bread""#)
        return watch
    }

    static func json(_ text: String) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
    }

    /// Alice writes an object and Bob reads it; both write it at once and both end with the
    /// same value and the other kept as a conflict copy, which `vault item list` shows; Bob
    /// deletes it and it goes from Alice's machine.
    @Test func objectsConvergeWithAConflictAndADelete() throws {
        let world = try SyncWorld()
        let put = try Self.app(world, "alice", "put", "item", "milk", #"{"quantity": 1}"#)
        #expect(put.status == 0 && put.stderr.contains("wrote item/milk (version ") && put.stderr.contains("; sent"), "\(put.stderr)")
        try world.ok("bob", "unlock", world.keyID)
        #expect(try world.run("bob", "sync").stderr.contains("now syncs"))
        #expect(try Self.app(world, "bob", "get", "item", "milk").stdout == "{\"quantity\": 1}\n")

        // Both write milk before either hears of the other's write.
        #expect(try Self.app(world, "alice", "put", "item", "milk", #"{"quantity":2}"#, "--no-send").status == 0)
        #expect(try Self.app(world, "bob", "put", "item", "milk", #"{"quantity":3}"#, "--no-send").status == 0)
        try world.ok("alice", "sync")
        try world.ok("bob", "sync")
        try world.ok("alice", "sync")
        let mine = try #require(try Self.json(try Self.app(world, "alice", "get", "item", "milk", "--json").stdout) as? [String: Any])
        let theirs = try #require(try Self.json(try Self.app(world, "bob", "get", "item", "milk", "--json").stdout) as? [String: Any])
        #expect(NSDictionary(dictionary: mine).isEqual(to: theirs), "\(mine) \(theirs)")
        let copies = try #require(mine["conflicts"] as? [[String: Any]])
        let values = Set([mine["value"], copies.first?["value"]].compactMap { ($0 as? [String: Any])?["quantity"] as? Int })
        #expect(copies.count == 1 && values == [2, 3], "\(mine)")
        let items = try world.ok("alice", "item", "list")
        #expect(items.contains("shopping-list/item/milk") && items.contains("CONFLICT"), "\(items)")
        #expect(try Self.app(world, "alice", "list").stdout.contains("CONFLICT"))

        let removed = try Self.app(world, "bob", "rm", "item", "milk")
        #expect(removed.status == 0 && removed.stderr.contains("deleted item/milk"), "\(removed.stderr)")
        try world.ok("alice", "sync")
        let gone = try Self.app(world, "alice", "get", "item", "milk")
        #expect(gone.status == 1 && gone.stderr.contains("app shopping-list has no object item/milk"), "\(gone.stderr)")
        for label in ["alice", "bob"] { #expect((try Self.json(try Self.app(world, label, "list", "--json").stdout) as? [Any])?.isEmpty == true) }
    }

    /// `vault app watch --json` prints the objects, then a line for each change as it
    /// happens: another holder's, within a relay's round trip (the relays answer a waiting
    /// request; a watch that polled every 25 s would miss the deadlines below), and a
    /// write by another program on this machine, at once. --after resumes after a line.
    @Test func watchStreamsChangesAsTheyHappen() throws {
        let world = try SyncWorld()
        let watch = try Self.bobWatches(world)
        let bob = world.holders["bob"]
        // After the objects held now, one line says they are all there.
        try watch.waitFor(#"\{"event":"ready","seq":[0-9]+\}"#)

        try #require(try Self.app(world, "alice", "put", "item", "eggs", #"{"quantity":12}"#).status == 0)
        // Bounds well under the 25 s a polling watch would take, with room for a loaded machine.
        try watch.waitFor(#""event":"put".*"id":"eggs".*"local":false.*"value":\{"quantity":12\}"#, timeout: 18)
        try #require(try Self.app(world, "bob", "put", "item", "jam", "true").status == 0)
        try watch.waitFor(#""id":"jam".*"local":true"#, timeout: 10)
        try #require(try Self.app(world, "alice", "rm", "item", "eggs").status == 0)
        try watch.waitFor(#""event":"delete".*"id":"eggs""#, timeout: 18)
        watch.stop()
        let lines = watch.log.split(separator: "\n").filter { $0.hasPrefix("{") }
        let last = try #require(try lines.last.map { try Self.json(String($0)) as? [String: Any] } ?? nil)
        #expect(last["author"] as? String == "alice" && last["version"] as? String != nil && last["value"] == nil, "\(last)")

        let resumed = try bob.vault.background(Self.watchArguments(world) + ["--after", "\(last["seq"] as? Int ?? -1)"], log: world.directory.file("watch2.log"))
        try #require(try Self.app(world, "alice", "put", "item", "tea", #""green""#).status == 0)
        try resumed.waitFor(#""id":"tea".*"value":"green""#, timeout: 12)
        resumed.stop()
        #expect(!resumed.log.contains("bread") && !resumed.log.contains("jam"), "\(resumed.log)")
    }

    /// A program that writes several objects in a row does not leave the watch deaf to
    /// the relays: another holder's write comes through within a relay's round trip, not a
    /// wait (25 s) later. Each write woke the watch, which hung up its waiting lists and
    /// asked again; the hung-up lists held all four of bob's slots at each relay, and the
    /// watch, answered at once, waited out its whole wait. Now the watch keeps its lists
    /// (MailWait), and a list answered at once is asked again within seconds
    /// (WaitingListTests.aClientRefusedASlotAsksAgain); either alone passes this test.
    @Test func aBurstOfLocalWritesKeepsTheWatchListening() throws {
        let world = try SyncWorld()
        let watch = try Self.bobWatches(world)
        let bob = world.holders["bob"]
        let writes = try (0..<8).map { i in
            defer { usleep(120_000) }
            return try bob.vault.background(["app", "put", "shopping-list", "--key", world.keyID, "item", "x\(i)", "1", "--no-send"],
                                            log: world.directory.file("put\(i).log"))
        }
        for write in writes { #expect(write.wait() == 0) }
        try watch.waitFor(#""id":"x7".*"local":true"#, timeout: 10)
        try #require(try Self.app(world, "alice", "put", "item", "eggs", #"{"quantity":12}"#).status == 0)
        try watch.waitFor(#""event":"put".*"id":"eggs".*"local":false"#, timeout: 12)
        watch.stop()
    }

    /// Wrong input is refused in words, before anything is asked or stored; a key that is not
    /// synced, or no serve, is said with what to do.
    @Test func mistakesAreRefusedInWords() throws {
        let world = try SyncWorld()
        let alice = world.holders["alice"].vault
        let before = alice.keystoreBytes()
        let notJSON = try Self.app(world, "alice", "put", "item", "milk", "{oops")
        #expect(notJSON.status == 1 && notJSON.stderr == "vault: error: the value is not JSON\n", "\(notJSON.stderr)")
        let badType = try Self.app(world, "alice", "put", "it em", "milk", "1")
        #expect(badType.status == 1 && badType.stderr.contains("the object type 'it em' may hold only"), "\(badType.stderr)")
        let badApp = try world.holders.run("alice", ["app", "list", "Shopping", "--key", "family"])
        #expect(badApp.status == 1 && badApp.stderr.contains("the app id 'Shopping' may hold only a-z"), "\(badApp.stderr)")
        #expect(alice.keystoreBytes() == before)

        let carol = try Self.app(world, "carol", "list")
        #expect(carol.status == 1 && carol.stderr.contains("is not synced through a group")
                && carol.stderr.contains("vault: hint: tie it to a group once: 'vault key sync"), "\(carol.stderr)")
        world.holders.servers["bob"]?.process.stop()
        try world.ok("bob", "receive")
        try world.holders["bob"].ok("key", "sync", world.keyID, "--group", "team")
        let noServe = try Self.app(world, "bob", "list")
        #expect(noServe.status == 1 && noServe.stderr.contains("no 'vault serve' runs for this keystore")
                && noServe.stderr.contains("start 'vault serve'"), "\(noServe.stderr)")
    }

    /// Security review L3: a value given as an argument was in `/proc/PID/cmdline`, which
    /// every local user reads, for as long as the command ran (here: while it waits for the
    /// passphrase). It is taken out as the command starts.
    @Test func aValueGivenAsAnArgumentLeavesTheProcessList() throws {
        let user = User()
        let words = try user.directory.write("words", Array("a long and careful passphrase\n".utf8))
        try user.initialize("alice", "--passphrase-file", words)
        let value = #"{"pin":"4711-secret"}"#
        let session = try user.vault.interactive("app", "put", "shopping-list", "item", "milk", value, "--key", "family")
        try session.expect("Passphrase for alice: ")
        let arguments = String(decoding: try Data(contentsOf: URL(fileURLWithPath: "/proc/\(session.processID)/cmdline")), as: UTF8.self)
        #expect(arguments.contains("shopping-list") && !arguments.contains("4711-secret"), "\(arguments)")
        session.signal(SIGTERM)
        _ = session.finish()
    }
}
