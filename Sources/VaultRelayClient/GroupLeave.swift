import Foundation
import VaultCore

/// How a member leaves a group it accepted, and joins it again (Docs/RELAY.md, "Joining a
/// group").
///
/// Leaving is the member's own opt-out: its relays stop listing the group and its messages
/// to it (the acceptance there becomes a decline), and this machine forgets the group and
/// remembers it as left, so that a later receive declines it again wherever it is still
/// listed, at any version, rather than taking it back. It does not take the member out of
/// the owner's record: only the owner can (`vault group remove`), and the owner's other
/// members still address it until then; what they send waits on the relays for its TTL
/// and is never served to a member who left.
extension Messenger {
    /// Leaves `record`'s group. Returns the relays that could not be told; each declines it
    /// at this identity's next receive instead. The owner cannot leave its own group.
    public static func leave(_ record: GroupRecord, keystore: Keystore, identity: Identity) async throws -> [RelayError] {
        guard record.owner != identity.card else {
            throw VaultError.ownerCannotLeave(record.name.value)
        }
        // Remembered first, with every relay as still to be told: should one be out of
        // reach, the next receive declines it there, and takes nothing of it meanwhile.
        try keystore.leave(group: record)
        return await tellRelays(try keystore.pendingDeclines().filter { $0.group == record.id }, keystore: keystore, identity: identity)
    }

    /// Asks each relay in `pending` to decline its group for this identity, all at once,
    /// and marks each that did as told (or that does not list the group to this identity at
    /// all). Returns the others, which are asked again at the next receive.
    static func tellRelays(_ pending: [PendingDecline], keystore: Keystore, identity: Identity) async -> [RelayError] {
        await withTaskGroup(of: (PendingDecline, RelayError?).self) { tasks in
            for decline in pending {
                tasks.addTask {
                    do {
                        try await answerGroup(decline.group, ownerKey: decline.owner, accept: false, on: RelayConnection(decline.relay, identity: identity))
                        return (decline, nil)
                    } catch let error as RelayError {
                        // The group is gone there, no longer names this identity, or is
                        // another owner's: nothing of it is served there to decline.
                        let done = ["unknown_group", "not_a_member", "other_owner"].contains(error.code)
                        return (decline, done ? nil : error)
                    } catch {
                        return (decline, RelayError(relay: decline.relay.name.value, code: "unreachable", words: VaultError.words(for: error)))
                    }
                }
            }
            var failures: [RelayError] = []
            for await (decline, failure) in tasks {
                if let failure {
                    failures.append(failure)
                } else {
                    try? keystore.declined(group: decline.group, at: decline.relay.card)
                }
            }
            return failures.sorted { $0.relay < $1.relay }
        }
    }

    /// Joins again `refusal`'s group, one this identity left (``Keystore/leftGroup(named:)``
    /// finds it by id): its record is fetched from a relay it named, and taken (from a
    /// trusted owner, naming this identity, at the version left or later) and accepted on
    /// every relay it names; one that cannot be reached then is a warning, declines the group
    /// for this identity until then, and is remembered: the member's next receive (or send
    /// through it) that reaches it accepts it there. The relays are asked one at a time, the
    /// first the record named first, until one gives a record that is taken: one that is
    /// down, or that serves a record that is not taken, does not stop the join. Returns what
    /// the taking said, as a receive would, with what each relay asked before said; a join
    /// that fails leaves the group as left.
    public static func join(_ refusal: GroupRefusal, keystore: Keystore, identity: Identity) async throws -> ReceiveReport {
        // The leave as it stands now: the passphrase was typed since `refusal` was looked up,
        // and another process may have joined, or left again at a newer version, meanwhile.
        guard let left = try keystore.leftGroup(refusal.group), left.owner == refusal.owner else {
            throw VaultError.unknownGroup(refusal.group.hex)
        }
        let relays = try keystore.relays(ofLeftGroup: left.group, owner: left.owner)
        let first = relays.first { $0.card == left.relayCard }.map { RelayConnection($0, identity: identity) }
            ?? RelayConnection(name: left.relayURL, url: left.relayURL, card: left.relayCard, identity: identity)
        var report = ReceiveReport()
        for connection in [first] + relays.filter({ $0.card != left.relayCard }).map({ RelayConnection($0, identity: identity) }) {
            await take(left.group, version: left.version, ownerKey: left.owner, from: connection, keystore: keystore, identity: identity,
                       joining: true, report: &report)
            if try keystore.leftGroup(left.group) == nil { break }
        }
        return report
    }
}
