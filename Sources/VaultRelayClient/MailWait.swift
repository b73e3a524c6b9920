import Synchronization
import VaultCore

/// One ``RelayMail/waitForMail(groups:identity:after:until:)`` running on its own, that a
/// watch keeps while other wake-ups come and go, and that signals a ``Wakeup`` when it ends.
///
/// A watch that also wakes for local writes should not start a new wait on the relays for
/// each: ending a wait hangs up its waiting lists, and each new wait costs a signed request
/// a relay. A relay holds four lists a key, and one from before 2026-11-29 let a hung-up
/// list's slot go only within a second: against such relays, a program that wrote a few
/// objects in a row took every slot its identity had, and its watch heard of what the
/// relays then stored only a whole wait later.
public final class MailWait: Sendable {
    /// Set by the wait's task, which does not hold the MailWait (its end cancels the task).
    private final class Ended: Sendable {
        let flag = Mutex(false)
    }

    private let ended = Ended()
    private let task: Task<Void, Never>

    /// Starts waiting on the relays of `groups` for what comes after `cursors`; `wakeup` is
    /// signalled when the wait ends (mail came, or its time is up), and not when the wait
    /// is dropped first. The wait's task runs on `executor` when one is given (the default:
    /// Swift's shared pool), as a caller whose pool is held for long may want: the wait's
    /// time starts before its first requests go out.
    public init(groups: [GroupRecord], identity: Identity, after cursors: RelayMail.Cursors, signalling wakeup: Wakeup,
                executor: (any TaskExecutor)? = nil) {
        let ended = self.ended
        task = Task(executorPreference: executor) {
            await RelayMail.waitForMail(groups: groups, identity: identity, after: cursors)
            // Dropped (its watch stopped): a signal now would wake the next watch for nothing.
            guard !Task.isCancelled else { return }
            ended.flag.withLock { $0 = true }
            wakeup.signal()
        }
    }

    /// Ends the wait, hanging up its waiting lists.
    deinit { task.cancel() }

    /// Whether the wait has ended: the relays are to be read, and a new wait begun.
    public var hasEnded: Bool { ended.flag.withLock { $0 } }
}
