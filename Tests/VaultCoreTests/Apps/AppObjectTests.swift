import Foundation
import GRDB
import Testing
@testable import VaultCore
import VaultTestSupport

/// Applications' objects on a synced key (Docs/API.md, FORMAT.md §22): names, values, and
/// the feed of events through concurrent writes, conflicts and deletes, on three keystores
/// that exchange changes by hand (``SyncTrio``).
@Suite struct AppObjectTests {
    /// Writes `value` as object `name` at holder `j`, and publishes it into the trio.
    @discardableResult
    static func put(_ trio: SyncTrio, _ j: Int, _ name: AppObjectName, _ value: String) throws -> ItemVersion {
        let header = try trio.keystores[j].appHeader(for: name, keyID: trio.keyID)
        let version = try trio.keystores[j].putAppObject(header, value: Array(value.utf8), itemKey: trio.itemKey(header), author: trio.identities[j])
        try trio.collect(j)
        return version
    }

    /// Holder `j`'s events of app "shop" after `cursor`, as "KIND ID VALUE".
    static func events(_ trio: SyncTrio, _ j: Int, after cursor: Int64 = 0) throws -> [String] {
        try trio.keystores[j].appEvents(app: "shop", keyID: trio.keyID, after: cursor).events.map { event in
            "\(event.kind) \(event.name.id) " + (try event.item.map { try trio.text(j, $0.id) } ?? "-")
        }
    }

    static func value(_ trio: SyncTrio, _ j: Int, _ name: AppObjectName) throws -> String? {
        try trio.keystores[j].appObject(name, keyID: trio.keyID).current.map { try trio.text(j, $0.id) }
    }

    @Test func namesDeriveOneItemPerObjectAndKey() throws {
        let milk = try AppObjectName(app: "shop", type: "item", id: "milk/2%")
        let keyA = [UInt8](repeating: 1, count: 16), keyB = [UInt8](repeating: 2, count: 16)
        #expect(milk.itemID(keyID: keyA) == (try AppObjectName(app: "shop", type: "item", id: "milk/2%")).itemID(keyID: keyA))
        #expect(milk.itemID(keyID: keyA) != milk.itemID(keyID: keyB))
        #expect(milk.itemID(keyID: keyA) != (try AppObjectName(app: "shop", type: "items", id: "milk/2%")).itemID(keyID: keyA))
        // The lengths are in the derivation: "ab"/"c" and "a"/"bc" are two objects.
        #expect((try AppObjectName(app: "ab", type: "c", id: "x")).itemID(keyID: keyA)
                != (try AppObjectName(app: "a", type: "bc", id: "x")).itemID(keyID: keyA))
        #expect(milk.title == "shop/item/milk/2%")
        // FORMAT.md §22, computed with Python's hashlib.blake2b from the text alone.
        #expect((try AppObjectName(app: "shopping-list", type: "item", id: "milk")).itemID(keyID: keyA).hex
                == "36b5a1a810947dd5a817be81d1904e86")
        // An item is an object only when its id is the derived one.
        let header = ItemHeader(itemID: milk.itemID(keyID: keyA), keyID: keyA, createdAt: 0, type: .note, passwordProtected: false,
                                title: milk.title, description: "")
        #expect(AppObjectName(header) == milk)
        let typedByHand = try ItemHeader(keyID: keyA, type: .note, title: milk.title, description: "")
        #expect(AppObjectName(typedByHand) == nil)

        for (app, type, id) in [("", "item", "x"), ("Shop", "item", "x"), ("-shop", "item", "x"), ("shop", "it em", "x"), ("shop", "item", ""),
                                ("shop", "item", "a\u{7}b"), ("shop", "item", String(repeating: "é", count: 65)),
                                (String(repeating: "a", count: 65), "item", "x"), ("shop", String(repeating: "T", count: 49), "x")] {
            #expect(throws: VaultError.self, "\(app)/\(type)/\(id)") { try AppObjectName(app: app, type: type, id: id) }
        }
        #expect(throws: VaultError.invalidAppObject("the value is not JSON")) { try Keystore.checkAppValue(Array("{milk".utf8)) }
        #expect(throws: VaultError.self) { try Keystore.checkAppValue(Array(repeating: 0x20, count: Keystore.maximumAppValue + 1)) }
        try Keystore.checkAppValue(Array("\"just a string\"".utf8))
    }

    /// Alice and Bob write one object without seeing each other's write: both end with the
    /// higher version as the value and the other kept as a conflict copy; each feed says so
    /// from its side. A later write by either supersedes both, on both machines.
    @Test func concurrentWritesConvergeWithAConflictCopyAndTheNextWriteEndsIt() throws {
        let trio = try SyncTrio()
        let milk = try AppObjectName(app: "shop", type: "item", id: "milk")
        let a = try Self.put(trio, 0, milk, #"{"quantity":1}"#)
        let b = try Self.put(trio, 1, milk, #"{"quantity":2}"#)
        try trio.deliver(1, to: 0)
        try trio.deliver(0, to: 1)
        let (winner, loser) = a > b ? ("1", "2") : ("2", "1")
        for j in 0...1 {
            #expect(try Self.value(trio, j, milk) == #"{"quantity":\#(winner)}"#)
            let copies = try trio.keystores[j].appObject(milk, keyID: trio.keyID).conflicts
            #expect(try copies.map { try trio.text(j, $0.id) } == [#"{"quantity":\#(loser)}"#])
        }
        #expect(try trio.state(0) == trio.state(1))
        // Whoever lost was told its value became a copy; whoever won, that the other's is one.
        let loserHolder = a > b ? 1 : 0
        #expect(try Self.events(trio, loserHolder) == ["put milk {\"quantity\":\(winner)}", "conflict milk {\"quantity\":\(loser)}"])
        #expect(try Self.events(trio, 1 - loserHolder) == ["put milk {\"quantity\":\(winner)}", "conflict milk {\"quantity\":\(loser)}"])
        let seen = try trio.keystores[0].latestAppEvent()

        try Self.put(trio, 1, milk, #"{"quantity":3}"#)
        try trio.deliver(2, to: 0)
        for j in 0...1 {
            #expect(try Self.value(trio, j, milk) == #"{"quantity":3}"#)
            #expect(try trio.keystores[j].appObject(milk, keyID: trio.keyID).conflicts.isEmpty)
        }
        #expect(try Self.events(trio, 0, after: seen) == [#"put milk {"quantity":3}"#])
        // What no longer holds is gone from the feed, not only skipped: from the start, one put.
        #expect(try Self.events(trio, 0) == [#"put milk {"quantity":3}"#])
        for keystore in trio.keystores.prefix(2) {
            #expect(try keystore.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM app_event") } == 1)
        }
        #expect(try trio.state(0) == trio.state(1))
    }

    /// A delete reaches the other holder as a delete event; the put it superseded, arriving
    /// later (a relay that delayed it), changes nothing and tells nothing.
    @Test func aDeleteIsAnEventAndALateOlderPutStaysSuperseded() throws {
        let trio = try SyncTrio()
        let eggs = try AppObjectName(app: "shop", type: "item", id: "eggs")
        try Self.put(trio, 0, eggs, #"{"quantity":6}"#)
        try trio.deliver(0, to: 1)
        try Self.put(trio, 1, eggs, #"{"quantity":12}"#)
        let deleted = try #require(try trio.keystores[1].deleteAppObject(eggs, keyID: trio.keyID, author: trio.identities[1]))
        try trio.collect(1)
        #expect(try trio.keystores[1].deleteAppObject(eggs, keyID: trio.keyID, author: trio.identities[1]) == nil)
        // Carol gets the delete first, then the puts it superseded.
        let cursor = try trio.keystores[2].latestAppEvent()
        try trio.deliver(2, to: 2)
        #expect(try Self.events(trio, 2, after: cursor).isEmpty)
        try trio.deliver(0, to: 2)
        try trio.deliver(1, to: 2)
        #expect(try trio.deliver(1, to: 2) == .duplicate)
        #expect(try Self.value(trio, 2, eggs) == nil)
        #expect(try Self.events(trio, 2, after: cursor).isEmpty)
        // Alice had the object: she is told it was deleted, by Bob's version.
        let before = try trio.keystores[0].latestAppEvent()
        try trio.deliver(1, to: 0)
        try trio.deliver(2, to: 0)
        let events = try trio.keystores[0].appEvents(app: "shop", keyID: trio.keyID, after: before).events
        #expect(events.map(\.kind) == [.delete] && events.first?.version == deleted && events.first?.isLocal == false)
        #expect(try Self.value(trio, 0, eggs) == nil)
        #expect(try trio.state(0) == trio.state(1) && trio.state(1) == trio.state(2))
    }

    /// Objects are items of the key: listed by app and type, and only the app's; an item
    /// edited by hand ('vault item edit') is a local event like an app's write.
    @Test func objectsAreItemsOfTheKeyInTheAppsNamespace() throws {
        let trio = try SyncTrio()
        try Self.put(trio, 0, try AppObjectName(app: "shop", type: "item", id: "milk"), "1")
        try Self.put(trio, 0, try AppObjectName(app: "shop", type: "store", id: "corner"), "2")
        try Self.put(trio, 0, try AppObjectName(app: "other", type: "item", id: "milk"), "3")
        try trio.add(0, "a note of the family", title: "shop/item/bread")
        let listed = try trio.keystores[0].appObjects(app: "shop", keyID: trio.keyID)
        #expect(listed.map(\.name.title) == ["shop/item/milk", "shop/store/corner"])
        #expect(try trio.keystores[0].appObjects(app: "shop", keyID: trio.keyID, type: "item").map(\.name.id) == ["milk"])
        #expect(try trio.keystores[0].items(keyID: trio.keyID).count == 4)
        let milk = try #require(listed.first)
        try trio.edit(0, milk.item.id, text: "5", title: milk.name.title)
        let last = try #require(try trio.keystores[0].appEvents(app: "shop", keyID: trio.keyID, after: 0).events.last)
        #expect(last.kind == .put && last.isLocal && last.name.id == "milk")
        #expect(try trio.text(0, milk.item.id) == "5")
    }

    /// Security review L3: another holder's value was bounded only where it was written.
    /// Here a stream that could hold more than an object may is refused before any of it is
    /// stored, whatever key opens it; a smaller one is taken.
    @Test func aReceivedValueIsBoundedAndChecked() throws {
        let trio = try SyncTrio()
        let name = try AppObjectName(app: "shop", type: "item", id: "huge")
        let header = try trio.keystores[1].appHeader(for: name, keyID: trio.keyID)
        let sealed = UInt64(Keystore.maximumAppValue + 200_000)
        var source = BytesSource([UInt8](repeating: 0, count: Int(sealed)))
        #expect(throws: VaultError.invalidAppObject("a value received is larger than the 1 MiB an object may have")) {
            try trio.keystores[1].importItem(header, streamLength: sealed, from: &source, key: trio.itemKey(header))
        }
        #expect(try trio.keystores[1].item(id: header.itemID) == nil)
        try Self.put(trio, 0, try AppObjectName(app: "shop", type: "item", id: "fits"), #"{"quantity":1}"#)
        try trio.deliver(0, to: 1)
        #expect(try Self.value(trio, 1, try AppObjectName(app: "shop", type: "item", id: "fits")) == #"{"quantity":1}"#)
    }
}
