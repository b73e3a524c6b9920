import Foundation
import VaultCore
import VaultRelayProtocol

/// Resend requests (Docs/RELAY.md, "Gaps and resends"): a recipient that sees a gap in a
/// member's numbering asks that member, through the group's relays, for the missing
/// numbers; the member answers by storing the very same shares again from its outbox.
///
/// A request is a message of kind `resendRequest` (in its signed header, which relays
/// read), sealed to the one member it asks, outside the numbering (sequence 0): relays see
/// that a request was made, never which numbers it names. Its content is the missing
/// numbers, each 8 bytes big-endian, at most ``maximumNumbers``.
///
/// Numbers the member cannot resend (a send that failed, or a message it no longer keeps)
/// it closes: a message of kind `closedNumbers`, made alike, tells the requester that they
/// will not come, and the requester stops reporting them as gaps.
extension Messenger {
    /// The most numbers one request names.
    static let maximumNumbers = 1000
    /// How long the relays keep a request: a day, as a member that has not received in a
    /// day will find the gap again and, having asked, hear of it in its own report. A gap
    /// still open a day after it was asked for is asked for again.
    static let requestLifetime: UInt64 = 86_400

    /// Sends one request to `member` for `sequences`. When it cannot be sent, the numbers
    /// are withdrawn, so the next receive asks again.
    static func requestResend(_ sequences: [UInt64], from member: GroupRecord.Member, in group: GroupRecord, keystore: Keystore,
                              identity: Identity, report: inout ReceiveReport) async {
        let numbers = Array(sequences.prefix(maximumNumbers))
        do {
            try await sendNotice(.resendRequest, numbers, to: member, in: group, keystore: keystore, identity: identity)
            report.asked.append(.init(group: group.name, member: member.label, sequences: numbers))
        } catch {
            try? keystore.withdrawResendRequests(group: group.id, sender: member.card.signingKey, sequences: numbers)
            report.problems.append("could not ask \(member.label) in \(group.name) to resend #\(list(numbers)): \(VaultError.words(for: error))")
        }
    }

    /// Sends `numbers` (at most ``maximumNumbers``) to `member` alone, as a message of
    /// `kind` (a resend request, or closed numbers): with k = max(2, ⌈n/2⌉), kept a day,
    /// deleted once confirmed. Fails unless k relays stored it.
    private static func sendNotice(_ kind: MessageHeader.Kind, _ numbers: [UInt64], to member: GroupRecord.Member, in group: GroupRecord,
                                   keystore: Keystore, identity: Identity) async throws {
        var body: [UInt8] = []
        for number in numbers { withUnsafeBytes(of: number.bigEndian) { body += $0 } }
        let n = group.relays.count
        let k = max(2, (n + 1) / 2)
        let request = MessageRequest(groupID: group.id, kind: kind, type: .note, threshold: k,
                                     recipients: [MessageRecipient(card: member.card, sequence: 0)],
                                     lifetime: requestLifetime, deleteWhenConfirmed: true)
        try await dealt(request, content: BytesSource(body), group: group, keystore: keystore, identity: identity) { header, paths in
            let stored = await store(paths, message: header.messageID, in: group, keystore: keystore, identity: identity)
            guard stored.accepted.count >= k else {
                throw VaultError.invalidSecret("only \(stored.accepted.count) relays stored it: " + stored.why)
            }
        }
    }

    /// The numbers a checked resend request or closed-numbers message names, read from its
    /// content (at most ``maximumNumbers``, each a nonzero 8-byte big-endian number).
    static func numbers(in shares: [ReceivedShare], kind: MessageHeader.Kind) throws -> [UInt64] {
        let what = kind == .resendRequest ? "the resend request" : "the message of closed numbers"
        var bytes: [UInt8] = []
        _ = try MessageOpening.open(shares) { chunk in
            guard bytes.count + chunk.count <= 8 * maximumNumbers else {
                throw VaultError.malformed(what: what, detail: "it names more than \(maximumNumbers) numbers")
            }
            bytes += chunk
        }
        guard !bytes.isEmpty, bytes.count % 8 == 0 else {
            throw VaultError.malformed(what: what, detail: "its content is not a list of 8-byte numbers")
        }
        let numbers = stride(from: 0, to: bytes.count, by: 8).map { start in
            bytes[start..<start + 8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        }
        guard !numbers.contains(0) else { throw VaultError.malformed(what: what, detail: "it names number 0") }
        return numbers
    }

    /// Takes `member`'s closed numbers: those that never arrived stop being gaps, and are
    /// reported once.
    static func closed(_ numbers: [UInt64], by member: GroupRecord.Member, in group: GroupRecord, keystore: Keystore,
                       report: inout ReceiveReport) throws {
        let closed = try keystore.closeNumbers(group: group.id, sender: member.card.signingKey, sequences: numbers)
        if !closed.isEmpty { report.closed.append(.init(group: group.name, member: member.label, sequences: closed)) }
    }

    /// Answers `member`'s request: each number still in the outbox is stored again on the
    /// group's relays (the same shares, so the same id: a recipient that has it meanwhile
    /// ignores it); the numbers no longer kept are closed, in one message to the member.
    static func answer(_ numbers: [UInt64], from member: GroupRecord.Member, in group: GroupRecord, keystore: Keystore, identity: Identity,
                       report: inout ReceiveReport) async {
        let outbox: RelayOutbox
        do {
            outbox = try RelayOutbox(home: keystore.home)
        } catch {
            report.problems.append("cannot answer \(member.label)'s resend request: \(VaultError.words(for: error))")
            return
        }
        let now = VaultClock.seconds()
        var resent: [UInt64] = [], gone: [UInt64] = []
        for number in numbers {
            guard let kept = try? keystore.sentMessage(group: group.id, recipient: member.card.signingKey, sequence: number, now: now),
                  kept.shares == group.relays.count else {
                gone.append(number)
                continue
            }
            guard let header = try? outbox.header(of: kept.id) else {
                gone.append(number)
                continue
            }
            let paths = (1...kept.shares).map { outbox.path(of: kept.id, index: $0) }
            let stored = await store(paths, message: kept.id, in: group, keystore: keystore, identity: identity)
            // Resent only if the member can rebuild it: fewer than k shares on the relays
            // would leave the gap open while the member is told it was filled.
            if stored.accepted.count < header.threshold {
                report.problems.append("could not resend #\(number) to \(member.label): only \(stored.accepted.count) of the \(header.threshold) relays needed stored it: "
                                       + stored.why)
            } else {
                resent.append(number)
            }
        }
        if !resent.isEmpty { report.resent.append(.init(group: group.name, member: member.label, sequences: resent)) }
        guard !gone.isEmpty else { return }
        // Only numbers this identity gave the member: a request cannot make it speak for
        // numbers it never used.
        let last = (try? keystore.lastSequence(group: group.id, recipient: member.card.signingKey)) ?? 0
        let closing = gone.filter { $0 <= last }
        if closing.count < gone.count {
            report.problems.append("\(member.label) asked in \(group.name) for #\(list(gone.filter { $0 > last })), never sent to \(member.label)")
        }
        guard !closing.isEmpty else { return }
        do {
            try await sendNotice(.closedNumbers, closing, to: member, in: group, keystore: keystore, identity: identity)
            report.declined.append(.init(group: group.name, member: member.label, sequences: closing))
        } catch {
            report.problems.append("\(member.label) asked in \(group.name) for #\(list(closing)), no longer kept here "
                                   + "(expired, failed to send, or sent with other relays); could not tell \(member.label) they will not come: "
                                   + VaultError.words(for: error))
        }
    }

    /// Drops from the outbox what expired, and what k of the group's relays say every
    /// recipient confirmed: a recipient confirms to each relay it read from, at least k,
    /// so one relay that lies cannot make the sender forget what it may be asked for.
    static func pruneOutbox(keystore: Keystore, identity: Identity, report: inout ReceiveReport) async {
        do {
            let outbox = try RelayOutbox(home: keystore.home)
            let kept = try outbox.prune(keystore: keystore, now: VaultClock.seconds())
            // Bounded: the oldest few each run, so a long outbox costs a receive little.
            for message in kept.prefix(32) {
                guard let group = try keystore.group(id: message.group), let header = try? outbox.header(of: message.id) else { continue }
                var agreeing = 0
                for relay in group.relays where agreeing < header.threshold {
                    let connection = RelayConnection(relay, identity: identity)
                    guard let (status, body) = try? await connection.send(.GET, "/v1/groups/\(group.idHex)/messages/\(message.id.hex)/receipts"),
                          status == 200, let receipts = try? JSONDecoder().decode(RelayAPI.Receipts.self, from: Data(body)) else { continue }
                    if receipts.confirmed >= receipts.recipients { agreeing += 1 }
                }
                if agreeing >= header.threshold { try outbox.drop(message, keystore: keystore) }
            }
        } catch {
            report.problems.append("the relay outbox: \(VaultError.words(for: error))")
        }
    }

    private static func list(_ numbers: [UInt64]) -> String { ReceiveReport.Numbers.list(numbers) }
}
