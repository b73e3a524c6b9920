import VaultCore

/// The takes of one group refresh: a receive asks all its relays at once, and every relay
/// of a new group lists it, so without this each would fetch the record and accept it on
/// every relay, n² acceptances for n relays.
///
/// The takes of a group run one after another. Each first waits for the one before it,
/// and is skipped when that one (or an earlier one) took the group, at the version listed
/// or newer, from the owner listed (any owner for a relay that names none): a take that
/// failed, that a relay answered with an older record than it listed, or that took
/// another owner's record, does not stop the next one, which is what a receive asking the
/// relays in turn did.
actor GroupTakes {
    /// What a take said, and the newest record taken of its group this run (its own, or
    /// the one before it).
    typealias Outcome = (report: ReceiveReport, taken: GroupRecord?)

    /// The last take of each group this run.
    private var last: [[UInt8]: Task<Outcome, Never>] = [:]

    /// Runs `take` (which returns the record it kept and accepted everywhere, if any) after
    /// the takes of this group started before it, unless one of those took it already.
    func once(_ group: [UInt8], owner: [UInt8]?, version: UInt64, _ take: @escaping @Sendable () async -> Outcome) async -> ReceiveReport {
        let before = last[group]
        let next = Task { () -> Outcome in
            let earlier = await before?.value.taken
            if let earlier, earlier.version >= version, owner.map({ $0 == earlier.owner.signingKey }) ?? true {
                return (ReceiveReport(), earlier)
            }
            let outcome = await take()
            let newest = [outcome.taken, earlier].compactMap { $0 }.max { $0.version < $1.version }
            return (outcome.report, newest)
        }
        last[group] = next
        // The take runs in a task of its own, which the caller's cancellation (a watch
        // stopping mid-refresh) does not reach by itself; a cancelled take is no take, and
        // the next one of the group goes ahead as after a failed one.
        return await withTaskCancellationHandler { await next.value.report } onCancel: { next.cancel() }
    }

    /// The newest record of `group` taken this run, once the takes started of it end; nil
    /// when none started or none took it.
    func taken(_ group: [UInt8]) async -> GroupRecord? {
        await last[group]?.value.taken
    }
}
