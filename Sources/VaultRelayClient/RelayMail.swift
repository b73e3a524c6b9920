import Foundation
import VaultCore

/// Waiting for what the relays of a user's groups hold for it, without polling: each relay
/// holds a waiting list (``RelayConnection/messages(after:wait:)``) until something for this
/// identity is stored there.
public enum RelayMail {
    /// Per relay (by its card's fingerprint): the cursor of the last message it listed.
    public typealias Cursors = [String: Int64]

    /// How long one waiting list is held: a relay answers at the latest after this, and the
    /// watch looks again.
    static let wait = 25
    /// The pause before asking again a relay that answered a waiting list empty and early,
    /// doubled at each refusal (``heard(on:after:until:)``).
    static let firstRetry = 1.0
    /// An answer this much before its wait was up was a refusal, not the wait's end.
    static let early = 1.0

    /// The relays of `groups`, each once.
    private static func connections(_ groups: [GroupRecord], identity: Identity) -> [String: RelayConnection] {
        var connections: [String: RelayConnection] = [:]
        for group in groups {
            for relay in group.relays where connections[relay.card.fingerprint] == nil {
                connections[relay.card.fingerprint] = RelayConnection(relay, identity: identity)
            }
        }
        return connections
    }

    /// The cursors after what each relay lists now. Taken before a pass reads the relays:
    /// whatever comes during the pass then ends the next wait at once.
    public static func latest(groups: [GroupRecord], identity: Identity) async -> Cursors {
        await withTaskGroup(of: (String, Int64?).self) { tasks in
            for (fingerprint, connection) in connections(groups, identity: identity) {
                tasks.addTask {
                    // Pages of 500, to the last one (bounded: 100,000 waiting messages). A relay
                    // that cannot be listed has no cursor: the wait does not ask it.
                    var cursor: Int64? = nil
                    for _ in 0..<200 {
                        guard let (_, last) = try? await connection.messages(after: cursor ?? 0) else { break }
                        guard let last else {
                            cursor = cursor ?? 0
                            break
                        }
                        cursor = last
                    }
                    return (fingerprint, cursor)
                }
            }
            var cursors: Cursors = [:]
            for await (fingerprint, cursor) in tasks { cursors[fingerprint] = cursor }
            return cursors
        }
    }

    /// Returns once any relay of `groups` lists something after its cursor, or its waiting
    /// list ends (``wait`` seconds), or `until`. A relay that cannot be reached is waited
    /// out rather than asked again at once.
    public static func waitForMail(groups: [GroupRecord], identity: Identity, after cursors: Cursors, until: Date = .distantFuture) async {
        let left = until.timeIntervalSinceNow
        guard left > 0 else { return }
        let seconds = max(1, min(wait, Int(left.rounded(.up))))
        let relays = connections(groups, identity: identity)
        guard !relays.isEmpty else {
            try? await Task.sleep(for: .seconds(seconds))
            return
        }
        let end = Date().addingTimeInterval(TimeInterval(seconds))
        await withTaskGroup(of: Void.self) { tasks in
            for (fingerprint, connection) in relays {
                tasks.addTask {
                    // Without a cursor (it could not be listed) it would answer at once with
                    // what it always lists: its end of the wait is the end.
                    if let cursor = cursors[fingerprint], await heard(on: connection, after: cursor, until: end) { return }
                    await sleep(until: end)
                }
            }
            _ = await tasks.next()
            tasks.cancelAll()
        }
    }

    /// Holds waiting lists on one relay until it lists something after `cursor` (true) or
    /// `end` passes (false).
    ///
    /// A relay answers a waiting list empty before its time when it cannot hold one more
    /// (``RelayConnection/messages(after:wait:)``): this identity's other lists there take
    /// every slot, or the relay's are all taken. Those slots free up (another program's
    /// wait ends; a list whose client hung up is let go at once, or within a second by a
    /// relay from before 2026-11-29), so the list is asked again after about 1, 2, 4 …
    /// seconds rather than not before `end`: a watch
    /// refused once would otherwise miss for a whole wait what the relay then stored. Each
    /// pause is drawn from ¾ to 1¼ of its length, so that clients refused together by a
    /// full relay do not come back together. A relay that cannot be reached, or stops
    /// answering, is asked no more in this wait.
    private static func heard(on connection: RelayConnection, after cursor: Int64, until end: Date) async -> Bool {
        var pause = firstRetry
        while !Task.isCancelled {
            let seconds = min(wait, Int(end.timeIntervalSinceNow.rounded(.up)))
            guard seconds >= 1 else { return false }
            let asked = Date()
            guard let listed = try? await connection.messages(after: cursor, wait: seconds) else { return false }
            guard listed.messages.isEmpty else { return true }
            // Its time was up, or nearly: the wait is over. Answered well before it: refused.
            guard asked.addingTimeInterval(TimeInterval(seconds) - early) > Date() else { return false }
            await sleep(until: min(end, Date().addingTimeInterval(pause * .random(in: 0.75...1.25))))
            pause *= 2
        }
        return false
    }

    /// Sleeps until `date`, or until the task is cancelled.
    private static func sleep(until date: Date) async {
        let left = date.timeIntervalSinceNow
        if left > 0 { try? await Task.sleep(for: .milliseconds(Int(left * 1000))) }
    }
}
