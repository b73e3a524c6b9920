import Foundation
import NIOCore
import VaultCore
import VaultRelayProtocol

/// Where a received message's content goes: the CLI's choice (a file in a folder, or
/// standard output), made once the message's fields are known.
public protocol MessageSink: AnyObject {
    /// A message starts: its header, its sender as the group names it, and its fields.
    func begin(_ header: MessageHeader, sender: GroupRecord.Member, metadata: SecretMetadata) throws
    /// The next authenticated content.
    func write(_ bytes: UnsafeRawBufferPointer) throws
    /// The message is whole: keep it, and say where it went.
    func commit() throws -> String
    /// The message failed part way: drop what was written.
    func discard()
}

/// What `vault send` did.
public struct SendReport: Sendable {
    /// The message's id.
    public let messageID: [UInt8]
    /// The relays that stored their share.
    public let accepted: [String]
    /// The relays that did not, and why.
    public let refused: [RelayError]
    /// Each recipient's sequence number.
    public let sequences: [(label: Label, sequence: UInt64)]
    /// Why the message could not be kept in the outbox for resends, when it could not.
    public var notKept: String?
}

/// What `vault receive` found.
public struct ReceiveReport: Sendable {
    /// A message received: its group, sender, sequence and where it went.
    public struct Received: Sendable {
        public let group: Label
        public let sender: Label
        public let sequence: UInt64
        public let type: SecretType
        public let destination: String
    }

    /// Sequence numbers of messages between this identity and another member.
    public struct Numbers: Sendable {
        public let group: Label
        public let member: Label
        public let sequences: [UInt64]

        /// The numbers as people read them: "1, #4, #5", after a leading "#".
        public var listed: String { Self.list(sequences) }

        static func list(_ numbers: [UInt64]) -> String { numbers.map(String.init).joined(separator: ", #") }
    }

    /// Messages received, in order.
    public var received: [Received] = []
    /// Groups accepted or updated.
    public var groups: [Label] = []
    /// Problems, one line each: a relay unreachable, a forged or damaged share (naming its relay), a record refused.
    public var problems: [String] = []
    /// Gaps in senders' numbering: numbers from a member that never arrived.
    public var gaps: [Numbers] = []
    /// Gaps this run asked their senders to fill (each gap is asked for once).
    public var asked: [Numbers] = []
    /// Messages this run stored again on the relays, at a member's request.
    public var resent: [Numbers] = []
    /// Numbers a member asked for that this identity no longer keeps (or never sent, as a
    /// send that failed): this run told the member they will not come.
    public var declined: [Numbers] = []
    /// Gaps their senders closed: those numbers will not come, and are no longer reported.
    public var closed: [Numbers] = []
    /// Item changes of synced keys (object sync).
    public var sync = SyncReport()
    /// What holders of secrets said to each other (share offers, piece requests, answers).
    public var holders = HolderReport()

    /// The problems, each once, in order (a relay that is down is found by every step that
    /// asks it).
    public var distinctProblems: [String] {
        var seen = Set<String>()
        return problems.filter { seen.insert($0).inserted }
    }
}

/// Sending and receiving through a group's relays (Docs/RELAY.md, "The client").
public enum Messenger {
    /// Publishes `record` to every relay it names. Returns each relay's refusal, if any.
    public static func publish(_ record: GroupRecord, identity: Identity) async -> [RelayError] {
        await everyRelay(of: record, identity: identity) { connection in
            let (status, body) = try await connection.send(.PUT, "/v1/groups/\(record.idHex)", body: record.encoded)
            guard status == 204 else { throw RelayConnection.failure(relay: connection.name, status: status, body: body) }
        }
    }

    /// Runs `request` on every relay `record` names, all at once. Returns each relay's
    /// failure, by relay name.
    static func everyRelay(of record: GroupRecord, identity: Identity,
                           _ request: @escaping @Sendable (RelayConnection) async throws -> Void) async -> [RelayError] {
        await withTaskGroup(of: RelayError?.self) { tasks in
            for relay in record.relays {
                tasks.addTask {
                    do {
                        try await request(RelayConnection(relay, identity: identity))
                        return nil
                    } catch let error as RelayError {
                        return error
                    } catch {
                        return RelayError(relay: relay.name.value, code: "unreachable", words: VaultError.words(for: error))
                    }
                }
            }
            var failures: [RelayError] = []
            for await failure in tasks { if let failure { failures.append(failure) } }
            return failures.sorted { $0.relay < $1.relay }
        }
    }

    /// Encrypts `content`, splits it into one share a relay of `group`, and stores each on
    /// its relay. Succeeds when at least `minimumRelays` relays stored their share; the
    /// shares are then kept in the relay outbox, to answer resend requests.
    ///
    /// A send that fails before any recipient could read it (fewer than k relays stored it,
    /// or it failed here before any upload) leaves no gap in the recipients' numbering when
    /// it can: the relays that may hold part of it are asked to delete it, and once none
    /// holds any, its numbers are given back (``SendFailure/returned``). Otherwise they stay
    /// used, and a recipient that asks for them is told they will not come.
    public static func send(
        _ content: some ByteSource, type: SecretType, metadata: SecretMetadata, group: GroupRecord, to recipients: [GroupRecord.Member],
        threshold: Int, minimumRelays: Int, lifetime: UInt64, deleteWhenConfirmed: Bool, keystore: Keystore, identity: Identity
    ) async throws -> SendReport {
        let n = group.relays.count
        guard threshold >= 2, threshold <= n, minimumRelays >= threshold, minimumRelays <= n else {
            throw VaultError.invalidThreshold(k: threshold, n: n)
        }
        let sequences = try keystore.nextSequences(group: group.id, recipients: recipients.map(\.card))
        let numbered = zip(recipients, sequences).map { MessageRecipient(card: $0.card, sequence: $1) }
        let request = MessageRequest(groupID: group.id, type: type, metadata: metadata, threshold: threshold, recipients: numbered,
                                     lifetime: lifetime, deleteWhenConfirmed: deleteWhenConfirmed)
        do {
            return try await dealt(request, content: content, group: group, keystore: keystore, identity: identity) { header, paths in
                let stored = await store(paths, message: header.messageID, in: group, keystore: keystore, identity: identity)
                var report = SendReport(messageID: header.messageID, accepted: stored.accepted, refused: stored.refused,
                                        sequences: zip(recipients, sequences).map { ($0.label, $1) }, notKept: nil)
                guard stored.accepted.count >= minimumRelays else {
                    var failure = SendFailure(report: report, minimumRelays: minimumRelays, threshold: threshold)
                    // Fewer than k: nobody can read it. Taken back from every relay that may
                    // hold part of it, its numbers are free again.
                    if stored.accepted.count < threshold,
                       await withdraw(header.messageID, from: stored.mayHold, in: group, identity: identity) {
                        failure.returned = (try? keystore.giveBack(group: group.id, recipients: numbered)) ?? []
                    }
                    failure.kept = zip(recipients, sequences).filter { member, _ in !failure.returned.contains { $0.card == member.card } }
                        .map { ($0.label, $1) }
                    throw failure
                }
                // A failed send is not kept: its sender was told it failed and may send it
                // again, so answering a resend request with it could deliver it twice.
                do {
                    try RelayOutbox(home: keystore.home).keep(paths, header: header, keystore: keystore)
                } catch {
                    report.notKept = VaultError.words(for: error)
                }
                return report
            }
        } catch let failure as SendFailure {
            throw failure
        } catch {
            // It failed here, before any upload (reading the content, the spool): no relay
            // has anything of it.
            _ = try? keystore.giveBack(group: group.id, recipients: numbered)
            throw error
        }
    }

    /// Asks each relay at `indices` to delete the message; true when every one of them
    /// answered that it holds none of it now (deleted, or never had it).
    static func withdraw(_ id: [UInt8], from indices: [Int], in group: GroupRecord, identity: Identity) async -> Bool {
        await withTaskGroup(of: Bool.self) { tasks in
            for j in indices {
                tasks.addTask {
                    let connection = RelayConnection(group.relays[j], identity: identity)
                    guard let (status, _) = try? await connection.send(.DELETE, "/v1/groups/\(group.idHex)/messages/\(id.hex)") else { return false }
                    return status == 204 || status == 404
                }
            }
            var gone = true
            for await answer in tasks { gone = gone && answer }
            return gone
        }
    }

    /// Deals `request` into one share file a relay of `group`, in the spool, and hands their
    /// paths (in relay order) to `body`; the files left in the spool are removed after.
    static func dealt<T>(_ request: MessageRequest, content: some ByteSource, group: GroupRecord, keystore: Keystore, identity: Identity,
                         _ body: (MessageHeader, [String]) async throws -> T) async throws -> T {
        let spool = try Spool(home: keystore.home)
        let outputs = try group.relays.map { _ in try OutputFile(path: spool.newPath()) }
        defer { for output in outputs { unlink(output.path) } }
        let headers = try MessageDealer.deal(request, content: content, sender: identity, outputs: outputs)
        for output in outputs { try output.commit() }
        return try await body(headers[0], outputs.map(\.path))
    }

    /// What uploading a message to a group's relays did.
    public struct Stored: Sendable {
        /// The relays that stored it, by name.
        let accepted: [String]
        /// The others, and why.
        let refused: [RelayError]
        /// The relays (by position) that may hold some of it: those that stored it, and
        /// those whose upload ended without their word (cut short, or an answer that is not
        /// theirs). A relay that refused in a signed answer, or could not be reached at
        /// all, holds nothing.
        let mayHold: [Int]

        /// How many relays stored it.
        public var count: Int { accepted.count }

        /// Why the others did not, one clause a relay ("relay r2: cannot reach it: …"):
        /// a count alone leaves the user guessing which relay to look at.
        var why: String { refused.map(\.description).joined(separator: "; ") }

        /// "only N of its M relays stored it, and K must", and why, when fewer than
        /// `minimum` (K) relays of `group` did; nil when enough did.
        public func shortfall(_ minimum: Int, of group: GroupRecord) -> String? {
            guard accepted.count < minimum else { return nil }
            return "only \(accepted.count) of its \(group.relays.count) relays stored it, and \(minimum) must" + (refused.isEmpty ? "" : ": " + why)
        }

        /// Throws ``RelayShortfall`` when fewer than `minimum` relays of `group` stored it.
        public func require(_ minimum: Int, of group: GroupRecord) throws {
            if let words = shortfall(minimum, of: group) { throw RelayShortfall(group: group.name.value, words: words) }
        }
    }

    /// Stores the share files at `paths` (one a relay, in the group's order) on their
    /// relays, all at once. A relay that has the message already (a resend, or a retried
    /// send) counts as having stored it.
    /// `digest` is the length and SHA-256 of a file every relay gets (an object message),
    /// when the caller has them.
    static func store(_ paths: [String], message id: [UInt8], in group: GroupRecord, keystore: Keystore, identity: Identity,
                      digest: (UInt64, [UInt8])? = nil) async -> Stored {
        // Per relay: its refusal (nil: stored), and whether it may hold some of it anyway.
        let results = await withTaskGroup(of: (Int, RelayError?, Bool).self) { tasks in
            for (j, relay) in group.relays.enumerated() where j < paths.count {
                tasks.addTask {
                    let connection = RelayConnection(relay, identity: identity)
                    do {
                        let (length, hash) = try digest ?? Spool.hash(paths[j])
                        let target = "/v1/groups/\(group.idHex)/messages/\(id.hex)"
                        var (status, body) = try await connection.upload(paths[j], to: target, length: length, bodyHash: hash)
                        // Holding the group's record is this identity's acceptance of it; a
                        // relay that has not heard so (down, or slow, when the group was
                        // taken) refuses the sender as no member. Accepting there (for the
                        // owner the record names, as a receive would) and storing once more
                        // keeps one missed acceptance from costing the message a relay.
                        // Not for a group left meanwhile (by another process): a leave is
                        // never undone but by `vault group join`.
                        if status == 403, group.owner != identity.card,
                           RelayConnection.failure(relay: relay.name.value, status: status, body: body).code == "not_a_member",
                           (try? keystore.group(id: group.id)) != nil {
                            try await answerGroup(group.id, ownerKey: group.owner.signingKey, accept: true, on: connection)
                            try? keystore.accepted(group: group.id, at: relay.card)
                            (status, body) = try await connection.upload(paths[j], to: target, length: length, bodyHash: hash)
                        }
                        // A signed refusal: a share refused part way leaves nothing behind.
                        guard status == 201 || status == 409 else {
                            return (j, RelayConnection.failure(relay: relay.name.value, status: status, body: body), false)
                        }
                        return (j, nil, true)
                    } catch let error as RelayError {
                        return (j, error, error.code != "unreachable" && error.code != "tls")
                    } catch {
                        // Cut short after the relay answered: it may have kept the share.
                        return (j, RelayError(relay: relay.name.value, code: "interrupted", words: VaultError.words(for: error)), true)
                    }
                }
            }
            var results: [(Int, RelayError?, Bool)] = []
            for await result in tasks { results.append(result) }
            return results.sorted { $0.0 < $1.0 }
        }
        return Stored(accepted: results.filter { $0.1 == nil }.map { group.relays[$0.0].name.value }, refused: results.compactMap(\.1),
                      mayHold: results.filter(\.2).map(\.0))
    }

    /// Fetches new group records and every waiting message from the relays, checks each
    /// share, opens each message from any k good shares into `sink`, confirms it to the
    /// relays and reports gaps in senders' numbering.
    ///
    /// Object messages (item changes of synced keys, Docs/RELAY.md "Object sync") are
    /// applied to the keystore as they come; with `objectsOnly` (`vault sync`) messages that
    /// are shares are left on the relays for `vault receive`, unopened. With `leavingHolderMail`
    /// (an app's sync, beside the watch of `vault serve`) holder messages are left to serve.
    /// Without `refreshingGroups` the group records held are used as they are (an app's
    /// sync asks for new ones once a minute, not at every sync).
    ///
    /// With `holderMailOnly` (`vault serve`'s watch, ``HolderMail/collect``) only holder
    /// messages are read: the one path by which serve and receive take them.
    public static func receive(groupName: String?, keystore: Keystore, identity: Identity, sink: MessageSink?,
                               objectsOnly: Bool = false, leavingHolderMail: Bool = false, holderMailOnly: Bool = false,
                               refreshingGroups: Bool = true) async throws -> ReceiveReport {
        var report = ReceiveReport()
        if refreshingGroups { await refreshGroups(keystore: keystore, identity: identity, report: &report) }
        // Every group, then the guest box, which holds holder messages only.
        let groups = try groupName.map { [try keystore.group(named: $0)] }
            ?? keystore.groups() + [HolderMail.guestBox(keystore: keystore, identity: identity)].compactMap { $0 }
        var round = RelayRound()
        // Relays whose listing failed in this run: the guest box, read last, does not wait
        // on them a second time (a stalled relay would cost the run a second deadline).
        var failed: Set<String> = []
        var droppedGuests = 0
        for listed in groups {
            let group = listed.isGuestBox ? listed.without(relays: failed) : listed
            // Left to a serve, the guest box (holder messages only) is not even listed.
            guard !group.relays.isEmpty, !(group.isGuestBox && leavingHolderMail) else { continue }
            // Made for a group's messages only: in no group, nothing is made on disk.
            let spool = try Spool(home: keystore.home)
            let connections = group.relays.map { RelayConnection($0, identity: identity) }
            // Which relays list which message of this group.
            var listed: [[UInt8]: [Int]] = [:]
            var order: [[UInt8]] = []
            // The relays are listed at once, and their lists taken in the group's order.
            let listings = await withTaskGroup(of: RelayListing.self) { tasks in
                for (j, connection) in connections.enumerated() {
                    tasks.addTask {
                        do { return RelayListing(index: j, entries: try await list(connection, group: group)) } catch {
                            return RelayListing(index: j, problem: VaultError.words(for: error))
                        }
                    }
                }
                var all = [RelayListing?](repeating: nil, count: connections.count)
                for await listing in tasks { all[listing.index] = listing }
                return all.compactMap { $0 }
            }
            // The relays listed without a problem, less those with a message left untaken.
            var readThrough = Set(listings.filter { $0.problem == nil }.map(\.index))
            defer { round.read(group, relays: readThrough) }
            for listing in listings {
                if let problem = listing.problem {
                    report.problems.append(problem)
                    failed.insert(group.relays[listing.index].card.fingerprint)
                }
                for entry in listing.entries where entry.group == group.idHex {
                    guard let id = [UInt8](hexID: entry.id) else { continue }
                    if listed[id] == nil { order.append(id) }
                    listed[id, default: []].append(listing.index)
                }
            }
            for id in order {
                let relays = listed[id]!
                if try keystore.hasReceived(message: id) {
                    // Left for this identity's other machines (HolderMail's emergency notices).
                    if try !keystore.isKeptUnconfirmed(message: id) { await confirm(id, in: group, on: relays.map { connections[$0] }) }
                    continue
                }
                var shares: [ReceivedShare] = []
                var object: (message: IncomingObjectMessage, path: String)?
                var servedBy = 0
                var isShare = false
                defer {
                    for share in shares { unlink(share.path) }
                    if let object { unlink(object.path) }
                }
                for j in relays {
                    if let threshold = shares.first?.header.threshold, shares.count >= threshold { break }
                    // An object message is whole on every relay: one good copy is enough.
                    if object != nil { break }
                    do {
                        switch try await SyncClock.measure(.download, {
                            try await fetch(id, in: group, from: connections[j], index: j + 1, spool: spool, identity: identity,
                                            // The guest box holds holder messages only: anything else a
                                            // relay serves there is not read.
                                            objectsOnly: objectsOnly || holderMailOnly || group.isGuestBox,
                                            holderOnly: holderMailOnly || group.isGuestBox,
                                            leavingHolderMail: leavingHolderMail)
                        }) {
                        case .share(let share): shares.append(share)
                        case .object(let message, let path): (object, servedBy) = ((message, path), j)
                        case .skipped: isShare = true
                        }
                    } catch {
                        report.problems.append(VaultError.words(for: error))
                    }
                    if isShare { break }
                }
                if isShare { continue }
                // Nothing came of it from any relay: what it was (a denial, say) is not known.
                if object == nil && shares.isEmpty { readThrough.subtract(relays) }
                // A guest message from a card this identity does not trust is dropped, and
                // only where it was served: a copy of someone's message id, stored under a
                // stranger's key on one relay, must not confirm the real one away on the
                // others (they serve it at the next run).
                if let object, group.isGuestBox, let sender = object.message.header?.sender,
                   !group.members.contains(where: { $0.card == sender }) {
                    droppedGuests += 1
                    await confirm(id, in: group, on: [connections[servedBy]])
                    continue
                }
                if let object {
                    // Confirmed unless this machine failed to keep it (a full disk): the
                    // relays then keep it for the next run.
                    let done = object.message.header?.kind == .holder
                        ? await HolderMail.received(object.message, path: object.path, in: group, keystore: keystore, identity: identity,
                                                    spool: spool, report: &report.holders)
                        : await ObjectSync.received(object.message, path: object.path, in: group, keystore: keystore, identity: identity,
                                                    spool: spool, report: &report)
                    if done, try !keystore.isKeptUnconfirmed(message: id) {
                        await confirm(id, in: group, on: relays.map { connections[$0] })
                    }
                    if !done { readThrough.subtract(relays) }
                    continue
                }
                guard let header = shares.first?.header, shares.count >= header.threshold else {
                    report.problems.append("message \(id.hex.prefix(8)) in \(group.name): fewer good shares than it needs, from \(relays.count) relays")
                    continue
                }
                guard let sender = group.member(signingKey: header.sender.signingKey) else {
                    report.problems.append("message \(id.hex.prefix(8)) in \(group.name): its sender is not a member; ignored")
                    continue
                }
                let sequence = header.recipients.first { $0.card == identity.card }?.sequence ?? 0
                do {
                    if header.kind.isNumberingNotice {
                        let numbers = try numbers(in: shares, kind: header.kind)
                        if try keystore.recordReceived(message: header, sequence: 0) {
                            if header.kind == .resendRequest {
                                await answer(numbers, from: sender, in: group, keystore: keystore, identity: identity, report: &report)
                            } else {
                                try closed(numbers, by: sender, in: group, keystore: keystore, report: &report)
                            }
                        }
                        await confirm(id, in: group, on: relays.map { connections[$0] })
                        continue
                    }
                    // A number seen before is refused before anything is opened: printed
                    // content cannot be taken back.
                    if try keystore.hasReceived(group: group.id, sender: header.sender.signingKey, sequence: sequence) {
                        report.problems.append("message \(id.hex.prefix(8)) from \(sender.label) repeats sequence number \(sequence); ignored")
                        continue
                    }
                    guard let sink else { continue }
                    let opened = try MessageOpening.open(shares, metadataReady: { try sink.begin(header, sender: sender, metadata: $0) },
                                                         output: sink.write)
                    // The number is recorded before the content is kept: a crash in between
                    // loses this copy, never shows one message twice.
                    guard try keystore.recordReceived(message: opened.header, sequence: sequence) else {
                        sink.discard()
                        report.problems.append("message \(id.hex.prefix(8)) from \(sender.label) repeats sequence number \(sequence); ignored")
                        continue
                    }
                    let destination: String
                    do {
                        destination = try sink.commit()
                    } catch {
                        // Not kept here after all (a full disk): taken again by the next run.
                        try? keystore.forgetReceived(message: opened.header)
                        throw error
                    }
                    report.received.append(.init(group: group.name, sender: sender.label, sequence: sequence, type: header.type, destination: destination))
                    await confirm(id, in: group, on: relays.map { connections[$0] })
                } catch {
                    sink?.discard()
                    report.problems.append("message \(id.hex.prefix(8)) from \(sender.label): \(VaultError.words(for: error))")
                }
            }
            // Numbering is the content messages' (vault send), which holder mail leaves alone.
            for member in group.members where member.card != identity.card && !holderMailOnly && !group.isGuestBox {
                let missing = try keystore.missingSequences(group: group.id, sender: member.card.signingKey)
                guard !missing.isEmpty else { continue }
                report.gaps.append(.init(group: group.name, member: member.label, sequences: missing))
                let ask = try keystore.newResendRequests(group: group.id, sender: member.card.signingKey, sequences: missing,
                                                         now: VaultClock.seconds(), again: requestLifetime)
                if !ask.isEmpty { await requestResend(ask, from: member, in: group, keystore: keystore, identity: identity, report: &report) }
            }
        }
        if droppedGuests > 0 {
            report.holders.problems.append("dropped \(droppedGuests) message\(droppedGuests == 1 ? "" : "s") from cards you do not trust "
                                           + "in your relays' guest box (a friend's new machine? add its card face to face, and have it "
                                           + "ask again with --restart)")
        }
        // Holder messages left to a serve were not read: this was no round of them.
        if !leavingHolderMail {
            report.holders.round = round
            try? keystore.noteRelaysRead(at: round.started)
        }
        if !holderMailOnly { await pruneOutbox(keystore: keystore, identity: identity, report: &report) }
        return report
    }

    /// Every message waiting for this identity in `group` on the relay (at most 100,000),
    /// page by page. Asked by group: another group's messages, which a group naming this
    /// identity without its consent could fill, never crowd out this one's.
    static func list(_ connection: RelayConnection, group: GroupRecord) async throws -> [RelayAPI.MessageEntry] {
        var entries: [RelayAPI.MessageEntry] = []
        var cursor: Int64?
        repeat {
            let path = "/v1/messages?limit=\(RelayAPI.maximumPage)&group=\(group.idHex)" + (cursor.map { "&after=\($0)" } ?? "")
            let (status, body) = try await connection.send(.GET, path)
            guard status == 200 else { throw RelayConnection.failure(relay: connection.name, status: status, body: body) }
            guard let page = try? JSONDecoder().decode(RelayAPI.Messages.self, from: Data(body)) else {
                throw RelayError(relay: connection.name, code: "malformed", words: "its list of messages is not valid")
            }
            entries += page.messages
            cursor = page.next
        } while cursor != nil && entries.count < 100_000
        return entries
    }

    /// What one relay served for a message.
    enum Fetched {
        /// A checked share of it.
        case share(ReceivedShare)
        /// A checked object message, whole, in the spool file at `path`.
        case object(IncomingObjectMessage, path: String)
        /// A share, left unread (`objectsOnly`).
        case skipped
    }

    /// Downloads one relay's copy of a message into the spool, checking it on the way: the
    /// sender's signature, this group and message, the body against what the header commits
    /// to, and for a share this relay's index and this identity's box. A message that fails
    /// names its relay.
    static func fetch(_ id: [UInt8], in group: GroupRecord, from connection: RelayConnection, index: Int, spool: Spool,
                      identity: Identity, objectsOnly: Bool, holderOnly: Bool = false, leavingHolderMail: Bool = false) async throws -> Fetched {
        let path = spool.newPath()
        let output = try OutputFile(path: path)
        var incoming = IncomingRelayMessage(maximumLength: IncomingMessageShare.largest)
        do {
            do {
                try await connection.download("/v1/groups/\(group.idHex)/messages/\(id.hex)", limit: IncomingMessageShare.largest,
                                              what: { incoming.object == nil ? "share" : "object message" }) { buffer in
                    try buffer.withUnsafeReadableBytes { bytes in
                        try incoming.take(bytes)
                        if objectsOnly, incoming.isDecided, incoming.object == nil { throw SkippedShare() }
                        // The watcher of `vault serve` reads holder messages only; what else it
                        // meets stays on the relays for `vault receive` and `vault sync`.
                        if holderOnly, incoming.isDecided, incoming.object.map({ $0.header.map { $0.kind != .holder } ?? false }) ?? true {
                            throw SkippedShare()
                        }
                        if leavingHolderMail, incoming.object?.header?.kind == .holder { throw SkippedShare() }
                        try output.write(bytes)
                    }
                }
            } catch is SkippedShare {
                unlink(path)
                return .skipped
            }
            try incoming.finish()
            // The relay refused one made past its clock's window, and this clock is within
            // that window of the relay's.
            try incoming.checkCreated(now: VaultClock.seconds(), slack: 2 * RequestSignature.window)
            guard let envelope = incoming.envelope, envelope.groupID == group.id, envelope.messageID == id else {
                throw VaultError.malformed(what: incoming.object == nil ? "the message share" : "the object message",
                                           detail: "it belongs to another group or message")
            }
            try output.commit()
            if let object = incoming.object { return .object(object, path: path) }
            guard let share = incoming.share, envelope.share?.index == index, envelope.share?.count == group.relays.count else {
                throw VaultError.malformed(what: "the message share", detail: "it is not this relay's share")
            }
            return .share(try ReceivedShare(checked: share, path: path, recipient: identity))
        } catch let error as RelayError {
            unlink(path)
            throw error
        } catch {
            unlink(path)
            let what = incoming.object == nil ? "share" : "object message"
            throw RelayError(relay: connection.name, code: "forged", words: "it served a damaged or forged \(what): \(VaultError.words(for: error))")
        }
    }

    private struct SkippedShare: Error {}

    static func confirm(_ id: [UInt8], in group: GroupRecord, on connections: [RelayConnection]) async {
        await withTaskGroup(of: Void.self) { tasks in
            for connection in connections {
                tasks.addTask { _ = try? await connection.send(.POST, "/v1/groups/\(group.idHex)/messages/\(id.hex)/confirm") }
            }
        }
    }
}

/// One relay's list of what waits for this identity, or why it could not be had.
private struct RelayListing: Sendable {
    /// The relay's place in its group's list.
    var index: Int
    var entries: [RelayAPI.MessageEntry] = []
    var problem: String?
}
