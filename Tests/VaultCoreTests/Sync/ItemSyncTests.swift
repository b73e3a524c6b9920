import Foundation
import Testing
@testable import VaultCore
import VaultTestSupport

/// Three holders of one shared key, synced: alice dealt it to bob and carol (2 of 3), each
/// trusts the others, and each keystore has tied the key to one group.
final class SyncTrio {
    let directory = TemporaryDirectory("vault-sync")
    let names = ["alice", "bob", "carol"]
    let keystores: [Keystore]
    let identities: [Identity]
    let key = SecureRandom().secureBytes(32)
    let keyID: [UInt8]
    /// Every change made, as published: the signed record and a put's export.
    var published: [(change: ItemChange, record: [UInt8], content: [UInt8])] = []

    init(extra: [String] = [], syncing: [Int] = [0, 1, 2]) throws {
        let directory = self.directory, all = names + extra
        keystores = try all.map { try Keystore.create(home: VaultHome(directory: directory.file($0)), label: Label($0), passphrase: nil) }
        identities = try keystores.map { try $0.unlock(passphrase: nil) }
        for (i, keystore) in keystores.enumerated() {
            for (j, other) in identities.enumerated() where j != i {
                _ = try keystore.addPeer(other.card, label: Label(all[j]), address: nil)
            }
        }
        let request = ShareRequest(type: .key, threshold: 2, holders: [(try Label("bob"), identities[1].card), (try Label("carol"), identities[2].card)])
        let keystores = self.keystores
        let outputs = try (0..<3).map { try keystores[$0].newBundleFile() }
        _ = try SecretDealer.share(request, content: BytesSource(key.withUnsafeBytes(Array.init)), dealer: identities[0], outputs: outputs)
        for output in outputs { try output.commit() }
        _ = try keystores[0].storeOwnBundle(at: outputs[0].path, identity: identities[0], name: Label("family"))
        for j in 1...2 { _ = try keystores[j].storeDeliveredBundle(at: outputs[j].path, identity: identities[j]) }
        keyID = try keystores[0].sharedKeys()[0].keyID
        for j in syncing { try keystores[j].startSync(keyID: keyID, group: Array(repeating: 1, count: 16), lifetime: 86_400, minimumRelays: 1,
                                                  author: identities[j]) }
    }

    func itemKey(_ header: ItemHeader) -> SecureBytes { SharedKey.itemKey(key, headerHash: header.hash) }

    /// Adds a note at holder `j`; returns its id.
    @discardableResult
    func add(_ j: Int, _ text: String, title: String = "") throws -> [UInt8] {
        let header = try ItemHeader(keyID: keyID, type: .note, title: title, description: "")
        var source = BytesSource(Array(text.utf8))
        let item = try keystores[j].addItem(header, metadata: SecretMetadata(), content: &source, itemKey: itemKey(header), password: nil,
                                            scrypt: .default, author: identities[j])
        try collect(j)
        return item.id
    }

    /// Edits item (or conflict copy) `id` at holder `j`: new text, or with nil a new title only.
    func edit(_ j: Int, _ id: [UInt8], text: String?, title: String) throws {
        let item = try keystores[j].item(matching: id.hex)
        let header = try item.header.edited(title: title)
        _ = try keystores[j].editItem(item, itemKey: itemKey(item.header), newHeader: header, newItemKey: itemKey(header),
                                      content: text.map { (SecretMetadata(), BytesSource(Array($0.utf8)), nil) }, scrypt: .default,
                                      author: identities[j])
        try collect(j)
    }

    func remove(_ j: Int, _ id: [UInt8]) throws {
        try keystores[j].removeItem(try keystores[j].item(matching: id.hex), author: identities[j])
        try collect(j)
    }

    /// Takes holder `j`'s unpublished changes into `published`, with a put's export as
    /// it is at once (a later change may drop it).
    func collect(_ j: Int) throws {
        for change in try keystores[j].unpublishedChanges(keyID: keyID) {
            var content: [UInt8] = []
            if change.operation == .put {
                let item = try #require(try keystores[j].items(keyID: keyID).first { $0.version == change.version })
                try keystores[j].exportItem(item) { content += $0 }
            }
            published.append((change, try #require(try keystores[j].record(of: change)), content))
            try keystores[j].markPublished(change)
        }
    }

    /// Delivers published change `n` to holder `j`, opening it when `unlocked`.
    @discardableResult
    func deliver(_ n: Int, to j: Int, unlocked: Bool = true) throws -> ChangeOutcome {
        let (_, record, content) = published[n]
        return try keystores[j].apply(ItemChange(record: record), record: record, content: { BytesSource(content) },
                                      itemKey: { unlocked ? self.itemKey($0) : nil })
    }

    /// What holder `j` holds under the key: each row's id, version and export.
    func state(_ j: Int) throws -> [String] {
        try keystores[j].items(keyID: keyID).map { item in
            var export: [UInt8] = []
            try keystores[j].exportItem(item) { export += $0 }
            return "\(item.idHex) \(item.version.map(String.init(describing:)) ?? "-") \(Sodium.blake2b(export).hex)"
        }.sorted()
    }

    /// The text of row `id` at holder `j`.
    func text(_ j: Int, _ id: [UInt8]) throws -> String {
        let item = try keystores[j].item(matching: id.hex)
        var out: [UInt8] = []
        try keystores[j].openItem(item, itemKey: itemKey(item.header)) { out += $0 }
        return String(decoding: out, as: UTF8.self)
    }
}

@Suite struct ItemSyncTests {
    /// Random adds, edits and removes by three holders, delivered in random order, some at
    /// once, some late, some twice, some dropped and resent at the end (some while the key
    /// is locked): every holder ends with the same rows, row for row.
    @Test(arguments: 0..<12)
    func randomHistoriesConverge(seed: Int) throws {
        let trio = try SyncTrio()
        let random = SeededRandom(seed: "sync-\(seed)")
        func pick(_ n: Int) -> Int { Int(random.bytes(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) } % UInt32(n)) }
        var delivered = Array(repeating: Set<Int>(), count: 3)
        for step in 0..<30 {
            let j = pick(3)
            let before = trio.published.count
            let rows = try trio.keystores[j].items(keyID: trio.keyID)
            let roll = pick(10)
            if rows.isEmpty || roll < 3 {
                try trio.add(j, "note \(step) by \(trio.names[j])")
            } else if roll < 8 {
                let row = rows[pick(rows.count)]
                try trio.edit(j, row.id, text: pick(2) == 0 ? "edit \(step) by \(trio.names[j])" : nil, title: "t\(step)")
            } else {
                try trio.remove(j, rows[pick(rows.count)].id)
            }
            // Its own changes are applied where they are made.
            delivered[j].formUnion(before..<trio.published.count)
            for other in 0..<3 where other != j {
                for n in trio.published.indices where !delivered[other].contains(n) && pick(3) == 0 {
                    try trio.deliver(n, to: other, unlocked: pick(4) != 0)
                    delivered[other].insert(n)
                }
                if !delivered[other].isEmpty, pick(5) == 0 {
                    let again = delivered[other].sorted()[pick(delivered[other].count)]
                    #expect(try trio.deliver(again, to: other) == .duplicate)
                }
            }
        }
        // The rest arrives, in any order, with duplicates: resends of what was dropped.
        for j in 0..<3 {
            var rest = trio.published.indices.filter { !delivered[j].contains($0) }
            rest += rest.filter { _ in pick(4) == 0 }
            for i in rest.indices.reversed() { rest.swapAt(i, pick(i + 1)) }
            for n in rest { try trio.deliver(n, to: j) }
        }
        let alice = try trio.state(0), bob = try trio.state(1), carol = try trio.state(2)
        #expect(bob == alice, "\(bob) vs \(alice)")
        #expect(carol == alice, "\(carol) vs \(alice)")
        #expect(trio.published.count >= 30)
    }

    /// Alice edits while Bob, not having seen it, edits too: the later version wins on both
    /// machines and the other is kept beside it as a conflict copy, under one id everywhere.
    /// Removing the copy on one machine removes it on the other and keeps the item.
    @Test func concurrentEditsKeepTheLoserAsAConflictCopy() throws {
        let trio = try SyncTrio()
        let id = try trio.add(0, "wifi: hunter2", title: "wifi")
        try trio.deliver(0, to: 1)
        try trio.edit(0, id, text: "wifi: alice's", title: "wifi")
        try trio.edit(1, id, text: "wifi: bob's", title: "wifi")
        #expect(try trio.deliver(2, to: 0) != .duplicate)
        #expect(try trio.deliver(1, to: 1) != .duplicate)
        #expect(try trio.state(0) == trio.state(1))
        let rows = try trio.keystores[0].items(keyID: trio.keyID)
        #expect(rows.count == 2)
        let copy = try #require(rows.first { $0.isConflict })
        let winner = try #require(rows.first { !$0.isConflict })
        #expect(winner.version! > copy.version!)
        #expect(Set([try trio.text(0, winner.id), try trio.text(0, copy.id)]) == ["wifi: alice's", "wifi: bob's"])
        // Carol gets them the other way round.
        for n in [2, 1, 0] { try trio.deliver(n, to: 2) }
        #expect(try trio.state(2) == trio.state(0))

        try trio.remove(1, copy.id)
        try trio.deliver(3, to: 0)
        for j in 0..<2 {
            let left = try trio.keystores[j].items(keyID: trio.keyID)
            #expect(left.count == 1 && left[0].id == id)
            #expect(try trio.text(j, id) == trio.text(0, winner.id))
        }
        #expect(try trio.state(0) == trio.state(1))
    }

    /// A delete is a tombstone: the put it deleted, arriving late, does not bring the item
    /// back; nor does a replay of an older put; and history lists what was seen.
    @Test func aLateOlderUpdateDoesNotUndoADelete() throws {
        let trio = try SyncTrio()
        let id = try trio.add(0, "v1")
        try trio.edit(0, id, text: "v2", title: "")
        try trio.remove(0, id)
        #expect(try trio.keystores[0].items(keyID: trio.keyID).isEmpty)
        // Bob gets the delete first, then the edit, then the add.
        #expect(try trio.deliver(2, to: 1) == .current)
        #expect(try trio.deliver(1, to: 1) == .superseded)
        #expect(try trio.deliver(0, to: 1) == .superseded)
        #expect(try trio.keystores[1].items(keyID: trio.keyID).isEmpty)
        let history = try trio.keystores[1].history(item: id)
        #expect(history.map(\.change.operation) == [.put, .put, .delete])
        #expect(history.map(\.state) == [.superseded, .superseded, .current])
        // Past the retention, the deleted item's history is collected, all but the delete:
        // the old versions, sent again, change nothing still.
        let later = Date().addingTimeInterval(TimeInterval(Keystore.tombstoneRetention + 60))
        #expect(try trio.keystores[1].collectTombstones(keyID: trio.keyID, now: later) == 1)
        #expect(try trio.keystores[1].history(item: id).map(\.change.operation) == [.delete])
        #expect(try trio.deliver(1, to: 1) == .superseded)
        #expect(try trio.keystores[1].items(keyID: trio.keyID).isEmpty)
    }

    /// A change stored while the key was locked is kept unopened, with its origin checked.
    @Test func aChangeReceivedWhileLockedIsKeptUnopened() throws {
        let trio = try SyncTrio()
        let id = try trio.add(0, "for later")
        #expect(try trio.deliver(0, to: 1, unlocked: false) == .current)
        let row = try trio.keystores[1].item(matching: id.hex)
        #expect(row.unopened)
        #expect(try trio.text(1, id) == "for later")
    }

    /// Refused, and nothing stored: a change by someone who holds no share of the key (even
    /// a trusted peer), a change whose content is not what its author signed, a record with
    /// a broken signature, and two different changes under one version.
    @Test func changesThatCannotBeTrustedAreRefused() throws {
        let trio = try SyncTrio(extra: ["mallory"])
        let mallory = trio.identities[3]
        // Mallory (trusted, not a holder) signs a delete.
        let forged = ItemChange(keyID: trio.keyID, itemID: Array(repeating: 3, count: 16), counter: 5, author: mallory.card, operation: .delete,
                                createdAt: 0, supersedes: [], contentLength: 0, contentHash: Array(repeating: 0, count: 32))
        let record = forged.signed(by: mallory)
        #expect(throws: VaultError.malformed(what: "the item change", detail: "its author does not hold its key")) {
            try trio.keystores[1].apply(ItemChange(record: record), record: record, content: { BytesSource([]) }, itemKey: { _ in nil })
        }
        // A damaged signature.
        _ = try trio.add(0, "real")
        var broken = trio.published[0].record
        broken[broken.count - 1] ^= 1
        #expect(throws: VaultError.badSignature(what: "the item change")) { try ItemChange(record: broken) }
        // The content swapped for other bytes.
        var content = trio.published[0].content
        content[content.count - 1] ^= 1
        let change = trio.published[0].change
        #expect(throws: VaultError.self) {
            try trio.keystores[1].apply(change, record: trio.published[0].record, content: { BytesSource(content) }, itemKey: { _ in nil })
        }
        #expect(try trio.keystores[1].items(keyID: trio.keyID).isEmpty)
        #expect(try trio.keystores[1].history(item: change.itemID).isEmpty)
        // Alice signs another change under the version she used.
        try trio.deliver(0, to: 1)
        let twin = ItemChange(keyID: trio.keyID, itemID: change.itemID, counter: change.version.counter, author: trio.identities[0].card,
                              operation: .delete, createdAt: 1, supersedes: [], contentLength: 0, contentHash: Array(repeating: 0, count: 32))
        let twinRecord = twin.signed(by: trio.identities[0])
        #expect(throws: VaultError.malformed(what: "the item change", detail: "its author signed another change with the same version")) {
            try trio.keystores[1].apply(twin, record: twinRecord, content: { BytesSource([]) }, itemKey: { _ in nil })
        }
        #expect(try trio.text(1, change.itemID) == "real")
    }

    /// An item exported by hand before the key was synced: a holder that starts syncing
    /// because the item's versions arrive drops its own copy instead of stating it again,
    /// so it is no conflict copy of itself; stated anyway, it would be one.
    @Test func aCopyImportedBeforeSyncIsAdoptedNotAConflict() throws {
        let trio = try SyncTrio(syncing: [0])
        let id = try trio.add(0, "wifi: hunter2")
        for j in 1...2 {
            var source = BytesSource(trio.published[0].content)
            let (header, length) = try trio.keystores[j].readItemHeader(&source)
            _ = try trio.keystores[j].importItem(header, streamLength: length, from: &source, key: trio.itemKey(header))
        }
        try trio.edit(0, id, text: "wifi: correct horse", title: "")
        let arriving = [id: Set(trio.published.map(\.change.contentHash))]
        try trio.keystores[1].startSync(keyID: trio.keyID, group: Array(repeating: 1, count: 16), lifetime: 86_400, minimumRelays: 1,
                                        author: trio.identities[1], arriving: arriving)
        try trio.keystores[2].startSync(keyID: trio.keyID, group: Array(repeating: 1, count: 16), lifetime: 86_400, minimumRelays: 1,
                                        author: trio.identities[2])
        for j in 1...2 { for n in [1, 0] { try trio.deliver(n, to: j) } }
        #expect(try trio.state(1) == trio.state(0))
        #expect(try trio.text(1, id) == "wifi: correct horse")
        #expect(try trio.keystores[2].items(keyID: trio.keyID).filter(\.isConflict).count == 1)
    }

    /// An object message (FORMAT §19) read in pieces of any size opens for each recipient
    /// and gives back its entries; a changed body, a changed header, bytes past its end and
    /// another reader are each refused.
    @Test func objectMessagesOpenOnlyWholeAndForTheirRecipients() throws {
        let trio = try SyncTrio()
        try trio.add(0, "one")
        let id = try trio.add(0, "two")
        try trio.remove(0, id)
        let spool = try Spool(home: trio.keystores[0].home)
        let request = ObjectMessage.Request(groupID: Array(repeating: 1, count: 16), kind: .changes, keyID: trio.keyID,
                                            recipients: [trio.identities[1].card, trio.identities[2].card], lifetime: 60, deleteWhenConfirmed: true)
        let (path, header) = try ObjectMessage.write(request, entries: { emit in
            for entry in trio.published.reversed() {
                try ObjectEntries.write(record: entry.record, content: entry.content.isEmpty ? nil : { try entry.content.withUnsafeBytes($0) }, to: emit)
            }
        }, sender: trio.identities[0], spool: spool)
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        func read(_ bytes: [UInt8]) throws -> IncomingObjectMessage {
            var incoming = IncomingObjectMessage(maximumLength: 1 << 20)
            var offset = 0, step = 1
            while offset < bytes.count {
                let end = min(bytes.count, offset + step)
                try bytes[offset..<end].withUnsafeBytes { try incoming.take($0) }
                offset = end
                step = step * 5 % 997 + 1
            }
            try incoming.finish()
            return incoming
        }
        let incoming = try read(bytes)
        #expect(incoming.header == header)
        for j in 1...2 {
            let plain = spool.newPath("test.plain")
            let output = try OutputFile(path: plain)
            try ObjectMessage.open(incoming, path: path, recipient: trio.identities[j], emit: output.write)
            try output.commit()
            var records: [[UInt8]] = []
            try ObjectEntries.read(path: plain) { _, record, _ in records.append(record) }
            #expect(records == trio.published.reversed().map(\.record))
            unlink(plain)
        }
        #expect(throws: VaultError.notForThisIdentity(what: "the object message")) {
            try ObjectMessage.open(incoming, path: path, recipient: trio.identities[0]) { _ in }
        }
        var body = bytes
        body[body.count - 1] ^= 1
        #expect(throws: VaultError.corruptSecret("the object message's body is not the one its sender signed")) { _ = try read(body) }
        var signed = bytes
        signed[20] ^= 1
        #expect(throws: VaultError.badSignature(what: "the object message")) { _ = try read(signed) }
        #expect(throws: VaultError.malformed(what: "the object message", detail: "bytes follow its end")) { _ = try read(bytes + [0]) }
        #expect(throws: VaultError.truncated(what: "the object message")) { _ = try read(Array(bytes.dropLast())) }
        unlink(path)
    }

    /// A holder who signs the highest counter uses the key's counters up: the next local
    /// change is refused in words, not a crash; a higher one is refused on arrival.
    @Test func aHugeCounterUsesTheKeyUpWithoutACrash() throws {
        let trio = try SyncTrio()
        let id = try trio.add(0, "note")
        func delete(_ counter: UInt64) -> ItemChange {
            ItemChange(keyID: trio.keyID, itemID: id, counter: counter, author: trio.identities[1].card, operation: .delete, createdAt: 0,
                       supersedes: [], contentLength: 0, contentHash: Array(repeating: 0, count: 32))
        }
        #expect(throws: VaultError.malformed(what: "the item change", detail: "its counter is out of range")) {
            try ItemChange(record: delete(ItemChange.maximumCounter + 1).signed(by: trio.identities[1]))
        }
        let top = delete(ItemChange.maximumCounter)
        #expect(try trio.keystores[0].apply(top, record: top.signed(by: trio.identities[1]), content: { BytesSource([]) },
                                            itemKey: { _ in nil }) == .current)
        #expect(throws: VaultError.self) { try trio.add(0, "one more") }
    }

    /// The version order, and a record read back is the record written.
    @Test func versionsOrderByCounterThenAuthor() throws {
        let low = ItemVersion(counter: 2, author: Array(repeating: 0xff, count: 32))
        let high = ItemVersion(counter: 3, author: Array(repeating: 0, count: 32))
        let tie = ItemVersion(counter: 3, author: [0] + Array(repeating: 1, count: 31))
        #expect(low < high && high < tie)
        #expect(tie.isNamed(by: "3.0001") && !tie.isNamed(by: "3.01"))
        let heads = ItemHeads([.init(version: low, operation: .put, supersedes: []), .init(version: high, operation: .put, supersedes: [low]),
                               .init(version: tie, operation: .delete, supersedes: [])])
        #expect(heads.winner?.version == tie && heads.isDeleted && heads.conflicts.map(\.version) == [high])
    }
}

extension ItemSyncTests {
    /// The keystore reads the superseded versions of stored records at their place, without
    /// parsing the rest (every write reads its item's whole history): what it reads is what
    /// the full parse reads, for records superseding 0, 1 and 16 versions.
    @Test func storedSupersededVersionsAreReadAtTheirPlace() throws {
        let trio = try SyncTrio()
        for count in [0, 1, 16] {
            let supersedes = (0..<count).map { ItemVersion(counter: UInt64($0 + 1), author: Array(repeating: UInt8($0), count: 32)) }
            let change = ItemChange(keyID: trio.keyID, itemID: Array(repeating: 7, count: 16), counter: 100, author: trio.identities[0].card,
                                    operation: .delete, createdAt: 1, supersedes: supersedes, contentLength: 0,
                                    contentHash: Array(repeating: 0, count: 32))
            let record = change.signed(by: trio.identities[0])
            #expect(ItemChange.storedSupersedes(record) == (try ItemChange(record: record)).supersedes)
            #expect(ItemChange.storedSupersedes(Array(record.prefix(123 + 40 * count))) == nil)
        }
    }
}
