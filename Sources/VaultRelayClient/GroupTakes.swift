import VaultCore

/// The takes of one group refresh, one a group: a receive asks all its relays at once, and
/// every relay of a new group lists it, so without this each would fetch the record and
/// accept it on every relay, n² acceptances for n relays.
///
/// A take is keyed by the group and the owner the relay named (none for a group a relay
/// lists as accepted and this identity does not know): a squatter's listing of the same id
/// under another owner is still fetched, refused, and does not stop the owner's.
actor GroupTakes {
    private struct Key: Hashable {
        let group: [UInt8]
        let owner: [UInt8]?
    }

    private var started: [Key: (version: UInt64, take: Task<ReceiveReport, Never>)] = [:]

    /// Whether a take of this group, for this owner, started this run: it accepts the group
    /// on every relay of the record, so no listing need accept it again.
    func started(_ group: [UInt8], owner: [UInt8]) -> Bool {
        started[Key(group: group, owner: owner)] != nil
    }

    /// Runs `take` unless a take of this group, for this owner, at this version or a newer
    /// one started already this run; then waits for that one to end and returns an empty
    /// report (the first says what was taken). A take of a newer version runs after the one
    /// before it ends, so their keystore writes come in order.
    func once(_ group: [UInt8], owner: [UInt8]?, version: UInt64,
              _ take: @escaping @Sendable () async -> ReceiveReport) async -> ReceiveReport {
        let key = Key(group: group, owner: owner)
        let before = started[key]
        if let before, before.version >= version {
            _ = await before.take.value
            return ReceiveReport()
        }
        let next = Task {
            _ = await before?.take.value
            return await take()
        }
        started[key] = (version, next)
        return await next.value
    }
}
