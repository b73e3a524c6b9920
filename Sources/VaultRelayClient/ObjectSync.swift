import Foundation
import VaultCore
import VaultRelayProtocol

/// What object sync did in one run (`vault sync`, `vault receive`).
public struct SyncReport: Sendable {
    /// Changes received that changed an item; conflict copies they made; changes that
    /// came after what supersedes them, and changes known already.
    public var applied = 0, conflicts = 0, superseded = 0, duplicates = 0
    /// Items received while their key was locked, checked now that it is unlocked.
    public var checked = 0
    /// Changes published, and to how many relays.
    public var published: [(key: String, changes: Int, relays: Int)] = []
    /// Keys that started syncing because a holder's change arrived for them.
    public var started: [String] = []
    /// Snapshots sent to members who asked, and asked for.
    public var snapshotsSent: [(key: String, member: String)] = []
    public var snapshotsAsked: [String] = []

    /// Nothing done yet.
    public init() {}

    /// Whether nothing came in or went out.
    public var isEmpty: Bool {
        applied + superseded + duplicates + checked == 0 && published.isEmpty && started.isEmpty && snapshotsSent.isEmpty
            && snapshotsAsked.isEmpty
    }
}

/// Item changes of synced keys through a group's relays (Docs/RELAY.md, "Object sync").
///
/// Changes go whole, not split: an item is already encrypted under its shared key, and each
/// message is also sealed to the key's holders among the group's members, so a relay reads
/// neither the items nor which items changed. Every relay of the group gets the same
/// message, and one copy from any of them is enough to receive it.
public enum ObjectSync {
    /// Publishes the changes of `keyID` made here and not yet stored on enough relays: one
    /// message, newest first, to every other holder of the key who is a member of its
    /// group. They count as published once the key's minimum of relays stored it.
    public static func publish(keyID: [UInt8], keystore: Keystore, identity: Identity, report: inout SyncReport) async throws {
        guard let settings = try keystore.syncSettings(keyID: keyID) else { throw VaultError.unknownKey(keyID.hex) }
        let unpublished = try keystore.unpublishedChanges(keyID: keyID)
        guard !unpublished.isEmpty else { return }
        let group = try group(of: settings, keystore: keystore)
        let recipients = try holders(of: keyID, in: group, keystore: keystore, except: identity.card)
        let name = try keyName(keyID, keystore)
        guard !recipients.isEmpty else {
            throw VaultError.invalidSecret("no other member of group \(group.name) holds key '\(name)': its changes stay here")
        }
        // A put's content is the row that holds its version. A put replaced since (here, or
        // by another holder who saw it) goes without content, after the changes that
        // replaced it, which go along even if they came from others: a receiver meets them
        // first, and never needs the content it was not sent.
        let rows = Dictionary(try keystore.items(keyID: keyID).compactMap { row in row.version.map { ($0, row) } },
                              uniquingKeysWith: { a, _ in a })
        var known: [ItemChange]?
        var changes = unpublished, included = Set(unpublished.map(\.version)), index = 0
        while index < changes.count {
            let change = changes[index]
            index += 1
            guard change.operation == .put, rows[change.version] == nil else { continue }
            if known == nil { known = try keystore.knownChanges(keyID: keyID).map(\.change) }
            for later in known! where later.itemID == change.itemID && later.supersedes.contains(change.version) {
                if included.insert(later.version).inserted { changes.append(later) }
            }
        }
        changes.sort { $0.version > $1.version }
        let request = ObjectMessage.Request(groupID: group.id, kind: .changes, keyID: keyID, recipients: recipients,
                                            lifetime: settings.lifetime, deleteWhenConfirmed: true)
        let stored = try await send(request, group: group, keystore: keystore, identity: identity) { emit in
            for change in changes {
                guard let record = try keystore.record(of: change) else { continue }
                let row = change.operation == .put ? rows[change.version] : nil
                try ObjectEntries.write(record: record, content: row.map { row in { try keystore.exportItem(row, to: $0) } }, to: emit)
            }
        }
        guard stored.count >= settings.minimumRelays else {
            throw VaultError.invalidSecret("only \(stored.count) of the \(settings.minimumRelays) relays needed stored the changes to '\(name)'"
                                           + (stored.refused.isEmpty ? "" : " (\(stored.why))") + "; they stay here for the next sync")
        }
        try keystore.markPublished(unpublished)
        report.published.append((name, unpublished.count, stored.count))
    }

    /// Asks the other holders of `keyID` in its group for their whole state of the key
    /// (`vault sync --full`), for a member that was away longer than the relays keep changes.
    public static func requestSnapshot(keyID: [UInt8], keystore: Keystore, identity: Identity, report: inout SyncReport) async throws {
        guard let settings = try keystore.syncSettings(keyID: keyID) else { throw VaultError.unknownKey(keyID.hex) }
        let group = try group(of: settings, keystore: keystore)
        let recipients = try holders(of: keyID, in: group, keystore: keystore, except: identity.card)
        let name = try keyName(keyID, keystore)
        guard !recipients.isEmpty else { throw VaultError.invalidSecret("no other member of group \(group.name) holds key '\(name)'") }
        let request = ObjectMessage.Request(groupID: group.id, kind: .snapshotRequest, keyID: keyID, recipients: recipients,
                                            lifetime: settings.lifetime, deleteWhenConfirmed: true)
        let stored = try await send(request, group: group, keystore: keystore, identity: identity) { _ in }
        guard stored.count >= 1 else { throw VaultError.invalidSecret("no relay of group \(group.name) stored the request: \(stored.why)") }
        report.snapshotsAsked.append(name)
    }

    /// Applies a checked object message that arrived in `group` (its bytes in the file at
    /// `path`): changes and snapshots go into the keystore one change at a time, each
    /// checked on its own; a request for a snapshot is answered. Problems go to `report`.
    /// Returns whether the message is done with (applied, or refused for good), and so may
    /// be confirmed to the relays; false when this machine could not keep it.
    static func received(_ message: IncomingObjectMessage, path: String, in group: GroupRecord, keystore: Keystore, identity: Identity,
                         spool: Spool, report: inout ReceiveReport) async -> Bool {
        guard let header = message.header else { return true }
        let id = header.messageIDHex.prefix(8)
        do {
            // The sender must be the member the group names (the whole card) and hold the key.
            guard let sender = group.members.first(where: { $0.card == header.sender }) else {
                throw VaultError.malformed(what: "the object message", detail: "its sender is not a member of \(group.name)")
            }
            let authors = AuthorChecks(keystore)
            if let refusal = try authors.refusal(header.sender, keyID: header.keyID) {
                throw VaultError.malformed(what: "the object message from \(sender.label)", detail: refusal)
            }
            let plain = spool.newPath("object.plain")
            defer { unlink(plain) }
            let output = try OutputFile(path: plain)
            try SyncClock.measure(.open) {
                try ObjectMessage.open(message, path: path, recipient: identity, emit: output.write)
                try output.commit()
            }
            if try keystore.syncSettings(keyID: header.keyID) == nil {
                // Items held here that are copies of versions in this message (exported by
                // hand before) are not stated again (``Keystore/startSync``).
                var arriving: [[UInt8]: Set<[UInt8]>] = [:]
                try ObjectEntries.read(path: plain) { change, _, _ in
                    guard change.operation == .put, change.keyID == header.keyID,
                          try authors.refusal(change.author, keyID: change.keyID) == nil else { return }
                    arriving[change.itemID, default: []].insert(change.contentHash)
                }
                // The sender's TTL, within what deletions are kept for.
                let lifetime = min(max(1, header.expiresAt - min(header.expiresAt, header.createdAt)), Keystore.tombstoneRetention)
                try keystore.startSync(keyID: header.keyID, group: group.id, lifetime: lifetime,
                                       minimumRelays: max(1, (group.relays.count + 1) / 2), author: identity, arriving: arriving)
                report.sync.started.append(try keyName(header.keyID, keystore))
            }
            switch header.kind {
            case .holder:
                // Messenger hands holder messages to HolderMail; none reaches here.
                return true
            case .snapshotRequest:
                // A snapshot that could not be sent is tried again at the next run: the
                // request stays on the relays.
                do {
                    try await sendSnapshot(keyID: header.keyID, to: sender, in: group, keystore: keystore, identity: identity)
                } catch {
                    report.problems.append("could not send the state of '\(try keyName(header.keyID, keystore))' to \(sender.label): \(VaultError.words(for: error)); tried again next time")
                    return false
                }
                report.sync.snapshotsSent.append((try keyName(header.keyID, keystore), sender.label.value))
            case .changes, .snapshot:
                // Conflict copies are counted by what the message left, not change by
                // change: a copy made by one change may be dropped by the next.
                let copiesBefore = try Set(keystore.items(keyID: header.keyID).filter(\.isConflict).map(\.id))
                defer {
                    let copiesAfter = (try? Set(keystore.items(keyID: header.keyID).filter(\.isConflict).map(\.id))) ?? []
                    report.sync.conflicts += copiesAfter.subtracting(copiesBefore).count
                }
                let started = ContinuousClock.now
                defer { SyncClock.current?.add(.apply, ContinuousClock.now - started) }
                // Every author is checked before the batch, which holds the keystore.
                try ObjectEntries.read(path: plain) { change, _, _ in _ = try authors.refusal(change.author, keyID: change.keyID) }
                try keystore.applyingChanges { batch in try ObjectEntries.read(path: plain) { change, record, content in
                    guard change.keyID == header.keyID else {
                        return report.problems.append("a change in message \(id) from \(sender.label) is for another key; ignored")
                    }
                    do {
                        switch try batch.apply(change, record: record, content: content.map { content in { content } }, itemKey: { _ in nil },
                                               authors: authors) {
                        case .current, .conflict: report.sync.applied += 1
                        case .superseded: report.sync.superseded += 1
                        case .duplicate: report.sync.duplicates += 1
                        }
                    } catch let error as VaultError {
                        // This machine failing (its disk) is not the change's fault.
                        switch error {
                        case .storage, .fileSystem: throw error
                        default: report.problems.append("change \(change.version) to item \(change.itemID.hex.prefix(8)) from \(sender.label): \(VaultError.words(for: error)); not applied")
                        }
                    } catch {
                        report.problems.append("change \(change.version) to item \(change.itemID.hex.prefix(8)) from \(sender.label): \(VaultError.words(for: error)); not applied")
                    }
                } }
            }
            _ = try keystore.recordReceived(object: header)
            return true
        } catch {
            report.problems.append("object message \(id) in \(group.name): \(VaultError.words(for: error))")
            switch error {
            case VaultError.storage, VaultError.fileSystem: return false
            default: return true
            }
        }
    }

    /// Sends `member` every change known for `keyID`, newest first, each put with its
    /// content when it is kept here.
    private static func sendSnapshot(keyID: [UInt8], to member: GroupRecord.Member, in group: GroupRecord, keystore: Keystore,
                                     identity: Identity) async throws {
        guard let settings = try keystore.syncSettings(keyID: keyID) else { return }
        guard try keystore.isHolder(member.card, keyID: keyID) else {
            throw VaultError.malformed(what: "the snapshot request", detail: "\(member.label) does not hold the key")
        }
        let known = try keystore.knownChanges(keyID: keyID)
        let rows = Dictionary(try keystore.items(keyID: keyID).compactMap { row in row.version.map { ($0, row) } },
                              uniquingKeysWith: { a, _ in a })
        let request = ObjectMessage.Request(groupID: group.id, kind: .snapshot, keyID: keyID, recipients: [member.card],
                                            lifetime: settings.lifetime, deleteWhenConfirmed: true)
        let stored = try await send(request, group: group, keystore: keystore, identity: identity) { emit in
            for (change, record) in known {
                let row = change.operation == .put ? rows[change.version] : nil
                try ObjectEntries.write(record: record, content: row.map { row in { try keystore.exportItem(row, to: $0) } }, to: emit)
            }
        }
        guard stored.count >= 1 else { throw VaultError.invalidSecret("no relay of group \(group.name) stored the snapshot: \(stored.why)") }
    }

    /// Writes one object message and stores it whole on every relay of `group`; returns
    /// which stored it, and why the others did not.
    static func send(_ request: ObjectMessage.Request, group: GroupRecord, keystore: Keystore, identity: Identity,
                     entries: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void) async throws -> Messenger.Stored {
        let spool = try Spool(home: keystore.home)
        let (path, header) = try SyncClock.measure(.seal) { try ObjectMessage.write(request, entries: entries, sender: identity, spool: spool) }
        defer { unlink(path) }
        // One file for every relay: hashed once, not once a relay.
        let digest = try Spool.hash(path)
        return await SyncClock.measure(.upload) {
            await Messenger.store(Array(repeating: path, count: group.relays.count), message: header.messageID, in: group,
                                  keystore: keystore, identity: identity, digest: digest)
        }
    }

    private static func group(of settings: SyncSettings, keystore: Keystore) throws -> GroupRecord {
        guard let group = try keystore.group(id: settings.groupID) else { throw VaultError.unknownGroup(settings.groupID.hex) }
        return group
    }

    /// The members of `group` other than `own` that hold a share of `keyID`.
    private static func holders(of keyID: [UInt8], in group: GroupRecord, keystore: Keystore, except own: KeyCard) throws -> [KeyCard] {
        try group.members.filter { $0.card != own }.map(\.card).filter { try keystore.isHolder($0, keyID: keyID) }
    }

    static func keyName(_ keyID: [UInt8], _ keystore: Keystore) throws -> String {
        try keystore.sharedKey(id: keyID)?.displayName ?? String(keyID.hex.prefix(16))
    }
}
