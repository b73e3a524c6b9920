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
extension Messenger {
    /// The most numbers one request names.
    static let maximumNumbers = 1000
    /// How long the relays keep a request: a day, as a member that has not received in a
    /// day will find the gap again and, having asked, hear of it in its own report.
    static let requestLifetime: UInt64 = 86_400

    /// Sends one request to `member` for `sequences`. When it cannot be sent, the numbers
    /// are withdrawn, so the next receive asks again.
    static func requestResend(_ sequences: [UInt64], from member: GroupRecord.Member, in group: GroupRecord, keystore: Keystore,
                              identity: Identity, report: inout ReceiveReport) async {
        let numbers = Array(sequences.prefix(maximumNumbers))
        var body: [UInt8] = []
        for number in numbers { withUnsafeBytes(of: number.bigEndian) { body += $0 } }
        let n = group.relays.count
        let k = max(2, (n + 1) / 2)
        let request = MessageRequest(groupID: group.id, kind: .resendRequest, type: .note, threshold: k,
                                     recipients: [MessageRecipient(card: member.card, sequence: 0)],
                                     lifetime: requestLifetime, deleteWhenConfirmed: true)
        do {
            try await dealt(request, content: BytesSource(body), group: group, keystore: keystore, identity: identity) { header, paths in
                let (accepted, refused) = await store(paths, message: header.messageID, in: group, identity: identity)
                guard accepted.count >= k else {
                    throw VaultError.invalidSecret("only \(accepted.count) relays stored it: " + refused.map(\.description).joined(separator: "; "))
                }
            }
            report.asked.append(.init(group: group.name, member: member.label, sequences: numbers))
        } catch {
            try? keystore.withdrawResendRequests(group: group.id, sender: member.card.signingKey, sequences: numbers)
            report.problems.append("could not ask \(member.label) in \(group.name) to resend #\(list(numbers)): \(VaultError.words(for: error))")
        }
    }

    /// The numbers a checked request names, read from its content (at most
    /// ``maximumNumbers``, each a nonzero 8-byte big-endian number).
    static func resendRequest(in shares: [ReceivedShare]) throws -> [UInt64] {
        var bytes: [UInt8] = []
        _ = try MessageOpening.open(shares) { chunk in
            guard bytes.count + chunk.count <= 8 * maximumNumbers else {
                throw VaultError.malformed(what: "the resend request", detail: "it names more than \(maximumNumbers) numbers")
            }
            bytes += chunk
        }
        guard !bytes.isEmpty, bytes.count % 8 == 0 else {
            throw VaultError.malformed(what: "the resend request", detail: "its content is not a list of 8-byte numbers")
        }
        let numbers = stride(from: 0, to: bytes.count, by: 8).map { start in
            bytes[start..<start + 8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        }
        guard !numbers.contains(0) else { throw VaultError.malformed(what: "the resend request", detail: "it names number 0") }
        return numbers
    }

    /// Answers `member`'s request: each number still in the outbox is stored again on the
    /// group's relays (the same shares, so the same id: a recipient that has it meanwhile
    /// ignores it); a number no longer kept is reported.
    static func answer(_ numbers: [UInt64], from member: GroupRecord.Member, in group: GroupRecord, keystore: Keystore, identity: Identity,
                       report: inout ReceiveReport) async {
        let outbox: RelayOutbox
        do {
            outbox = try RelayOutbox(home: keystore.home)
        } catch {
            report.problems.append("cannot answer \(member.label)'s resend request: \(VaultError.words(for: error))")
            return
        }
        let now = UInt64(Date().timeIntervalSince1970)
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
            let (accepted, refused) = await store(paths, message: kept.id, in: group, identity: identity)
            // Resent only if the member can rebuild it: fewer than k shares on the relays
            // would leave the gap open while the member is told it was filled.
            if accepted.count < header.threshold {
                report.problems.append("could not resend #\(number) to \(member.label): only \(accepted.count) of the \(header.threshold) relays needed stored it: "
                                       + refused.map(\.description).joined(separator: "; "))
            } else {
                resent.append(number)
            }
        }
        if !resent.isEmpty { report.resent.append(.init(group: group.name, member: member.label, sequences: resent)) }
        if !gone.isEmpty {
            report.problems.append("\(member.label) asked in \(group.name) for #\(list(gone)), no longer kept here "
                                   + "(expired, failed to send, or sent with other relays)")
        }
    }

    /// Drops from the outbox what expired, and what k of the group's relays say every
    /// recipient confirmed: a recipient confirms to each relay it read from, at least k,
    /// so one relay that lies cannot make the sender forget what it may be asked for.
    static func pruneOutbox(keystore: Keystore, identity: Identity, report: inout ReceiveReport) async {
        do {
            let outbox = try RelayOutbox(home: keystore.home)
            let kept = try outbox.prune(keystore: keystore, now: UInt64(Date().timeIntervalSince1970))
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
