import Foundation
import VaultCore
import VaultNet
import VaultRelayClient

/// A Swift type that gives itself a name in an app's namespace, rather than going by its
/// Swift name (which a refactoring could change, and objects written under the old name
/// would then go unread).
public protocol AppObjectType {
    /// The type's name among the app's objects: 1 to 48 of `A-Z a-z 0-9 . _ -`.
    static var appType: String { get }
}

/// An application's objects, kept alike on every machine of the people who hold a shared
/// key, through the relays of the key's group (Docs/API.md).
///
/// Each object is a signed change of the key's items in the app's own namespace: sealed end
/// to end (relays see neither values nor names), ordered by versions (a Lamport counter and
/// the author), not by arrival, so every holder converges on the same value; a write made
/// without seeing another is kept as a conflict copy, not lost. `vault item list` shows the
/// objects and `vault sync` carries them, like any item of the key.
///
///     let store = try await AppStore.open("account-book", types: [Record.self], key: "family")
///     try await store.put(record.id, record)          // kept here, signed
///     try await store.sync { change in … }             // sent, and the others' changes applied
///
/// The key must be unlocked in the agent of `vault serve` (`vault unlock KEY`): values are
/// sealed and opened with item keys the agent derives, and the key itself never reaches the
/// app.
public final class AppStore: @unchecked Sendable {
    // @unchecked: every stored property is immutable but the time groups were last refreshed,
    // which a lock guards; the keystore and the agent client are safe to use from any task.

    /// The application's id, its namespace among the key's items.
    public let appID: String
    /// The shared key the objects are items of.
    public let key: KeyHolding
    /// The group whose relays carry them.
    public let group: GroupRecord
    /// The keystore they live in.
    public let keystore: Keystore
    private let identity: Identity?
    private let agent: AgentClient
    private let types: [String: any Decodable.Type]
    /// Signalled by every write, here or (through ``KeystoreWatch``) by another process: a
    /// watch then sends what was written and hands it out.
    private let local = Wakeup()
    /// When this store last asked the relays for new group records.
    private var groupsRefreshed: ContinuousClock.Instant? {
        get { refreshLock.withLock { refreshed } }
        set { refreshLock.withLock { refreshed = newValue } }
    }
    private var refreshed: ContinuousClock.Instant?
    private let refreshLock = NSLock()

    private init(appID: String, key: KeyHolding, group: GroupRecord, keystore: Keystore, identity: Identity?, agent: AgentClient,
                 types: [String: any Decodable.Type]) {
        self.appID = appID
        self.key = key
        self.group = group
        self.keystore = keystore
        self.identity = identity
        self.agent = agent
        self.types = types
    }

    /// Opens app `appID`'s objects on shared key `key` (its name, or the first hex digits
    /// of its id) in the keystore at `home` (default: `$VAULT_HOME`, as `vault` finds it).
    ///
    /// - Parameters:
    ///   - types: the Swift types the app stores; changes of these types come decoded
    ///     (``AppChange/value``). Each is named by ``AppObjectType/appType``, or its Swift name.
    ///   - group: the group whose relays carry the key's changes. The key is tied to it if it
    ///     is not synced yet (as `vault key sync KEY --group GROUP` does, keeping changes 7
    ///     days on half the relays); nil: the key must be synced already.
    ///   - passphrase: the keystore's passphrase, when its private keys have one.
    public static func open(_ appID: String, types: [any Decodable.Type] = [], key: String, group: String? = nil, home: String? = nil,
                            passphrase: SecureBytes? = nil) async throws -> AppStore {
        let keystore = try Keystore.open(home: VaultHome.resolve(explicit: home))
        return try await open(appID, types: types, keystore: keystore, identity: keystore.unlock(passphrase: passphrase), key: key,
                              group: group)
    }

    /// Opens app `appID`'s objects in an open keystore, as `identity` (nil: for reading only).
    public static func open(_ appID: String, types: [any Decodable.Type] = [], keystore: Keystore, identity: Identity?, key: String,
                            group: String? = nil) async throws -> AppStore {
        try AppObjectName.checkApp(appID)
        var named: [String: any Decodable.Type] = [:]
        for type in types {
            let name = typeName(type)
            try AppObjectName.checkType(name)
            guard named.updateValue(type, forKey: name) == nil else { throw VaultError.invalidAppObject("two of the types are named \(name)") }
        }
        let holding = try keystore.sharedKey(matching: key)
        let settings = try keystore.syncSettings(keyID: holding.keyID)
        let record: GroupRecord
        if let group {
            record = try keystore.group(named: group)
            if let settings {
                guard settings.groupID == record.id else {
                    let current = try keystore.group(id: settings.groupID)?.name.value ?? String(settings.groupID.hex.prefix(8))
                    throw AppError.otherGroup(key: holding.displayName, group: current)
                }
            } else {
                guard let identity else { throw AppError.readOnly }
                guard record.members.contains(where: { $0.card == identity.card }) else { throw AppError.notAMember(group: record.name.value) }
                try keystore.startSync(keyID: holding.keyID, group: record.id, lifetime: 7 * 86_400,
                                       minimumRelays: (record.relays.count + 1) / 2, author: identity)
            }
        } else {
            guard let settings else { throw AppError.notSynced(key: holding.displayName) }
            guard let found = try keystore.group(id: settings.groupID) else { throw VaultError.unknownGroup(settings.groupID.hex) }
            record = found
        }
        guard let agent = await AgentClient.connect(home: keystore.home) else { throw AppError.noAgent }
        return AppStore(appID: appID, key: holding, group: record, keystore: keystore, identity: identity, agent: agent, types: named)
    }

    /// The name objects of Swift type `type` go by: its ``AppObjectType/appType``, else its
    /// Swift name.
    public static func typeName(_ type: Any.Type) -> String {
        (type as? any AppObjectType.Type)?.appType ?? String(describing: type)
    }

    // MARK: - Writing

    /// Stores `value` as object `id` of its type, signed by you, to be sent at the next
    /// ``sync(_:)``. It replaces the object's current value and its conflict copies here.
    /// Returns the new version.
    @discardableResult
    public func put<T: Encodable>(_ id: String, _ value: T) async throws -> ItemVersion {
        try await put(type: Self.typeName(T.self), id: id, json: Self.encoder.encode(value))
    }

    /// Stores `json` (one JSON value, at most 1 MiB) as object `id` of `type`.
    @discardableResult
    public func put(type: String, id: String, json: Data) async throws -> ItemVersion {
        guard let identity else { throw AppError.readOnly }
        let name = try AppObjectName(app: appID, type: type, id: id)
        let value = [UInt8](json)
        try Keystore.checkAppValue(value)
        return try await SyncClock.measure(.put) {
            let header = try keystore.appHeader(for: name, keyID: key.keyID)
            let version = try keystore.putAppObject(header, value: value, itemKey: try await itemKey(for: header), author: identity)
            local.signal()
            return version
        }
    }

    /// Stores several objects of one type, as ``put(_:_:)`` does, in one transaction for each
    /// ``AppStore/batch`` of them: a write to the keystore flushes the disk (some 6 ms on an
    /// ordinary disk), once per transaction. Returns their versions.
    @discardableResult
    public func put<T: Encodable>(contentsOf objects: [(id: String, value: T)]) async throws -> [ItemVersion] {
        let type = Self.typeName(T.self)
        return try await put(type: type, contentsOf: try objects.map { ($0.id, try Self.encoder.encode($0.value)) })
    }

    /// Stores several objects of `type`, each `json` one JSON value.
    @discardableResult
    public func put(type: String, contentsOf objects: [(id: String, json: Data)]) async throws -> [ItemVersion] {
        guard let identity else { throw AppError.readOnly }
        var versions: [ItemVersion] = []
        for start in stride(from: 0, to: objects.count, by: Self.batch) {
            let part = objects[start..<min(objects.count, start + Self.batch)]
            versions += try await SyncClock.measure(.put) {
                let headers = try part.map { id, _ in try keystore.appHeader(for: AppObjectName(app: appID, type: type, id: id), keyID: key.keyID) }
                let keys = try await itemKeys(for: headers)
                return try keystore.putAppObjects(zip(headers, zip(part, keys)).map { ($0, [UInt8]($1.0.json), $1.1) }, author: identity)
            }
        }
        local.signal()
        return versions
    }

    /// Objects written in one transaction at most (``put(contentsOf:)``): the item keys and
    /// values of a batch are held at once.
    public static let batch = 256

    /// Deletes object `id` of type `T`, signed by you, to be sent at the next ``sync(_:)``;
    /// returns the delete's version, or nil when nothing of the object is held here.
    @discardableResult
    public func delete<T>(_ id: String, of _: T.Type) async throws -> ItemVersion? {
        try await delete(type: Self.typeName(T.self), id: id)
    }

    /// Deletes object `id` of `type`.
    @discardableResult
    public func delete(type: String, id: String) async throws -> ItemVersion? {
        guard let identity else { throw AppError.readOnly }
        let version = try keystore.deleteAppObject(try AppObjectName(app: appID, type: type, id: id), keyID: key.keyID, author: identity)
        local.signal()
        return version
    }

    // MARK: - Reading

    /// Object `id`'s current value, decoded as `T`; nil when it is deleted or unknown here.
    public func get<T: Decodable>(_ id: String, as _: T.Type) async throws -> T? {
        guard let json = try await object(type: Self.typeName(T.self), id: id)?.current?.json else { return nil }
        return try JSONDecoder().decode(T.self, from: json)
    }

    /// Every object of type `T` with a current value, by id.
    public func all<T: Decodable>(_: T.Type) async throws -> [String: T] {
        var all: [String: T] = [:]
        for object in try await objects(type: Self.typeName(T.self)) {
            if let json = object.current?.json { all[object.id] = try JSONDecoder().decode(T.self, from: json) }
        }
        return all
    }

    /// The concurrent values of object `id` of type `T` that lost to its current one
    /// (highest version first), kept until the object is next written.
    public func conflicts<T: Decodable>(_ id: String, of _: T.Type) async throws -> [T] {
        try await object(type: Self.typeName(T.self), id: id)?.conflicts.map { try JSONDecoder().decode(T.self, from: $0.json) } ?? []
    }

    /// Object `id` of `type` as held here: its current value and conflict copies; nil when
    /// nothing of it is held.
    public func object(type: String, id: String) async throws -> AppObjectState? {
        let name = try AppObjectName(app: appID, type: type, id: id)
        let (current, copies) = try keystore.appObject(name, keyID: key.keyID)
        guard current != nil || !copies.isEmpty else { return nil }
        let authors = try AuthorNames(keystore)
        var conflicts: [AppObjectState.Value] = []
        for copy in copies { conflicts.append(try await value(of: copy, authors)) }
        return AppObjectState(type: type, id: id, current: current == nil ? nil : try await value(of: current!, authors), conflicts: conflicts)
    }

    /// Every object held here (of `type` only, if given), by type and id.
    public func objects(type: String? = nil) async throws -> [AppObjectState] {
        if let type { try AppObjectName.checkType(type) }
        let authors = try AuthorNames(keystore)
        var states: [AppObjectState] = []
        var current: AppObjectState.Value?, conflicts: [AppObjectState.Value] = [], last: AppObjectName?
        func flush() {
            if let last { states.append(AppObjectState(type: last.type, id: last.id, current: current, conflicts: conflicts)) }
            current = nil
            conflicts = []
        }
        for entry in try keystore.appObjects(app: appID, keyID: key.keyID, type: type) {
            if entry.name != last { flush() }
            last = entry.name
            let value = try await value(of: entry.item, authors)
            if entry.isConflict { conflicts.append(value) } else { current = value }
        }
        flush()
        return states
    }

    // MARK: - Syncing

    /// Sends this machine's changes through the group's relays, takes the other holders',
    /// and hands `apply` every change since the app's last sync, in the order they were
    /// learnt here (the app's own writes too: applying a change is an upsert or a delete,
    /// and doing it twice does no harm). The app's cursor moves past a page of changes once
    /// `apply` returned for each, so a crash part way hands them out again.
    ///
    /// Throws ``AppError/unsent(_:)`` when this machine's changes could not be stored on
    /// enough relays (they stay, and go at the next sync), after applying what arrived.
    @discardableResult
    public func sync(_ apply: (AppChange) async throws -> Void = { _ in }) async throws -> AppSyncReport {
        guard let identity else { throw AppError.readOnly }
        var report = AppSyncReport()
        let unsent = await pass(receiving: true, identity: identity, report: &report)
        _ = try await deliver(after: try keystore.appCursor(app: appID, keyID: key.keyID), persisting: true, report: &report, apply)
        if let unsent { throw AppError.unsent(unsent) }
        return report
    }

    /// Sends this machine's unsent changes of the key now, without taking the others';
    /// returns how many went. Throws ``AppError/unsent(_:)`` when they could not be stored on
    /// enough relays (they stay, and go at the next sync).
    @discardableResult
    public func send() async throws -> Int {
        guard let identity else { throw AppError.readOnly }
        var published = SyncReport()
        do {
            try await ObjectSync.publish(keyID: key.keyID, keystore: keystore, identity: identity, report: &published)
        } catch {
            throw AppError.unsent(VaultError.words(for: error))
        }
        return published.published.reduce(0) { $0 + $1.changes }
    }

    /// Hands `body` the changes after sequence number `after` (nil: after the app's cursor,
    /// which then moves as they are handed out), then each change as it happens: as soon as
    /// a relay has one for this identity (the relays hold a waiting list, so nothing polls)
    /// or a program on this machine writes one. Writes made here are sent as they are made.
    /// Runs until the task is cancelled; `reporting` hears each problem once (a relay down,
    /// the key locked), and again if it comes back after it went. One watch at a time on an
    /// AppStore (``changes(reporting:)`` is one too): they share its wake-up, which wakes
    /// one waiter.
    public func watch(after start: Int64? = nil, reporting: @escaping @Sendable (String) -> Void = { _ in },
                      _ body: (AppChange) async throws -> Void) async throws {
        guard let identity else { throw AppError.readOnly }
        let persisting = start == nil
        var cursor = try start ?? keystore.appCursor(app: appID, keyID: key.keyID)
        let others = KeystoreWatch(home: keystore.home, wakeup: local)
        defer { withExtendedLifetime(others) {} }
        var receiving = true, relayCursors: RelayMail.Cursors = [:], said = Set<String>()
        // The wait on the relays, kept across local wake-ups (MailWait says why).
        var mail: MailWait?
        while !Task.isCancelled {
            // Taken before the pass: what arrives during it ends the next wait at once.
            if receiving { relayCursors = await RelayMail.latest(groups: [group], identity: identity) }
            var report = AppSyncReport()
            let unsent = await pass(receiving: receiving, identity: identity, report: &report)
            var problems = report.problems
            if let unsent { problems.append("this machine's changes were not sent: \(unsent)") }
            do {
                cursor = try await deliver(after: cursor, persisting: persisting, report: &report, body)
            } catch let error as VaultError where error == .keyLocked(key.displayName) {
                problems.append("\(error.description): changes wait until 'vault unlock \(key.displayName)'")
            }
            for problem in problems where said.insert(problem).inserted { reporting(problem) }
            said.formIntersection(problems)
            let waiting = mail ?? MailWait(groups: [group], identity: identity, after: relayCursors, signalling: local)
            // Until a relay holds something for this identity (or the wait's time is up),
            // or a write on this machine.
            await local.wait()
            receiving = waiting.hasEnded
            mail = receiving ? nil : waiting
        }
    }

    /// ``watch(after:reporting:_:)`` as a stream: the changes since the app's cursor, then
    /// each as it happens, until the stream is dropped. The cursor moves as changes are
    /// handed to the stream, before the app has applied them; use ``watch(after:reporting:_:)``
    /// or ``sync(_:)`` where a crash must not skip a change.
    public func changes(reporting: @escaping @Sendable (String) -> Void = { _ in }) -> AsyncThrowingStream<AppChange, Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    try await self.watch(reporting: reporting) { continuation.yield($0) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Every object held now, as changes (puts and conflicts) numbered with the feed's last
    /// sequence number: a watch that starts after it misses nothing that happens later.
    /// Here `isLocal` says the value was written by this identity.
    public func snapshot() async throws -> (changes: [AppChange], through: Int64) {
        let through = try keystore.latestAppEvent()
        let authors = try AuthorNames(keystore), me = try keystore.identityInfo().card.signingKey
        var changes: [AppChange] = []
        let entries = try keystore.appObjects(app: appID, keyID: key.keyID)
        for (entry, itemKey) in zip(entries, try await itemKeys(for: entries.map(\.item.header))) {
            guard let version = entry.item.version else { continue }
            do {
                changes.append(try change(entry.isConflict ? .conflict : .put, entry.name, version: version, authors: authors,
                                          isLocal: version.author == me, sequence: through, date: entry.item.storedAt, item: (entry.item, itemKey)))
            } catch VaultError.invalidAppObject {
                continue  // another holder's value that is no object's (a watch's deliver says so)
            }
        }
        return (changes, through)
    }

    // MARK: - Inside

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// One round with the relays: takes what they hold for this identity (when `receiving`),
    /// sends this machine's unsent changes, and opens items that came while the key was
    /// locked. Returns why the changes were not sent, if they were not.
    private func pass(receiving: Bool, identity: Identity, report: inout AppSyncReport) async -> String? {
        if receiving {
            do {
                // Holder messages are left to `vault serve`, which runs beside every app (its
                // agent holds the key).
                // Group records change rarely (a member added): asked for once a minute.
                let refreshing = groupsRefreshed.map { $0.duration(to: .now) > .seconds(60) } ?? true
                let received = try await Messenger.receive(groupName: group.idHex, keystore: keystore, identity: identity, sink: nil,
                                                           objectsOnly: true, leavingHolderMail: true, refreshingGroups: refreshing)
                if refreshing { groupsRefreshed = .now }
                report.problems += received.distinctProblems
            } catch {
                report.problems.append(VaultError.words(for: error))
            }
        }
        var unsent: String?
        var published = SyncReport()
        do {
            try await ObjectSync.publish(keyID: key.keyID, keystore: keystore, identity: identity, report: &published)
            try keystore.collectTombstones(keyID: key.keyID)
        } catch {
            unsent = VaultError.words(for: error)
        }
        report.sent += published.published.reduce(0) { $0 + $1.changes }
        let access = await KeyAccess.open(keystore)
        let opened = await SyncClock.measure(.deliver) { await UnopenedItems.open(keystore: keystore, only: key.keyID, access: access) }
        report.problems += opened.problems
        return unsent
    }

    /// Hands `body` the events after `start`, page by page; returns the last sequence number
    /// read. With `persisting`, the app's cursor moves past each page once it is handed out.
    private func deliver(after start: Int64, persisting: Bool, report: inout AppSyncReport,
                         _ body: (AppChange) async throws -> Void) async throws -> Int64 {
        var cursor = start
        while true {
            let (events, through) = try keystore.appEvents(app: appID, keyID: key.keyID, after: cursor)
            guard through > cursor else { return cursor }
            let authors = try AuthorNames(keystore)
            let keys = try await SyncClock.measure(.deliver) { try await itemKeys(for: events.compactMap(\.item?.header)) }
            var nextKey = keys.makeIterator()
            for event in events {
                let kind: AppChange.Kind = switch event.kind {
                case .put: .put
                case .delete: .delete
                case .conflict: .conflict
                }
                let itemKey = event.item.map { ($0, nextKey.next()!) }
                let change: AppChange
                do {
                    change = try SyncClock.measure(.deliver) {
                        try self.change(kind, event.name, version: event.version, authors: authors, isLocal: event.isLocal,
                                        sequence: event.sequence, date: event.date, item: itemKey)
                    }
                } catch VaultError.invalidAppObject(let why) {
                    // Another holder's value that is no object's: said, and passed over.
                    report.problems.append("\(event.name.type)/\(event.name.id) from \(authors.name(event.version.author)): \(why)")
                    continue
                }
                try await body(change)
                report.delivered += 1
            }
            cursor = through
            // Read by the app: no longer new in `vault item list`.
            try keystore.markOpened(events.compactMap(\.item))
            if persisting { try keystore.setAppCursor(app: appID, keyID: key.keyID, to: cursor) }
        }
    }

    /// A change to hand out; `item` is the row holding its value and that row's item key.
    private func change(_ kind: AppChange.Kind, _ name: AppObjectName, version: ItemVersion, authors: AuthorNames, isLocal: Bool,
                        sequence: Int64, date: Date, item: (row: StoredItem, itemKey: SecureBytes)?) throws -> AppChange {
        let json = try item.map { try self.json(of: $0.row, itemKey: $0.itemKey) }
        let type = types[name.type]
        let value: Any? = if let json, let type { try? JSONDecoder().decode(type, from: json) } else { nil }
        return AppChange(kind: kind, type: name.type, id: name.id, version: version, author: authors.name(version.author), isLocal: isLocal,
                         sequence: sequence, date: date, json: json, value: value, objectType: type)
    }

    private func value(of item: StoredItem, _ authors: AuthorNames) async throws -> AppObjectState.Value {
        guard let version = item.version else { throw VaultError.unexpected("an app object without a version") }
        return AppObjectState.Value(version: version, author: authors.name(version.author), json: try await json(of: item))
    }

    /// An item's content: the object's JSON.
    private func json(of item: StoredItem) async throws -> Data {
        try json(of: item, itemKey: try await itemKey(for: item.header))
    }

    /// Checked as a value written here is (``Keystore/checkAppValue(_:)``): another holder's
    /// app may send anything its key lets it seal, and a reader here must not take more than
    /// an object may hold, nor hand an app what is not JSON.
    private func json(of item: StoredItem, itemKey: SecureBytes) throws -> Data {
        var json = Data()
        try keystore.openItem(item, itemKey: itemKey, marking: false) { bytes in
            guard json.count + bytes.count <= Keystore.maximumAppValue else {
                throw VaultError.invalidAppObject("a value received is larger than the \(ByteCount.limit(UInt64(Keystore.maximumAppValue))) an object may have")
            }
            json.append(contentsOf: bytes)
        }
        try Keystore.checkAppValue([UInt8](json))
        return json
    }

    /// The item keys for `headers`, on one connection to the agent.
    private func itemKeys(for headers: [ItemHeader]) async throws -> [SecureBytes] {
        try await agent.itemKeys(keyID: key.keyID, headerHashes: headers.map(SharedKey.headerHash)).map { itemKey in
            guard let itemKey else { throw VaultError.keyLocked(key.displayName) }
            return itemKey
        }
    }

    private func itemKey(for header: ItemHeader) async throws -> SecureBytes {
        guard let itemKey = try await agent.itemKey(keyID: key.keyID, headerHash: SharedKey.headerHash(header)) else {
            throw VaultError.keyLocked(key.displayName)
        }
        return itemKey
    }
}
