import Foundation
import VaultCore

/// `vault serve`'s watch over the relays of the user's groups: it takes share offers, piece
/// requests and answers as they arrive, and sends the answers of requests decided here, so
/// that nobody has to run `vault receive` for a friend's request to reach its person. An
/// emergency wait that ends here is released when it ends, by this machine's clock.
///
/// It waits on the relays (waiting lists, Docs/RELAY.md), which answer as soon as something
/// arrives for this identity, and is woken at once when a request is decided here.
public final class HolderWatch: @unchecked Sendable {
    private let keystore: Keystore
    private let identity: Identity
    private let report: @Sendable (HolderReport) -> Void
    private let wakeup = Wakeup()

    /// A watch as `identity`; `report` hears what each pass did.
    public init(keystore: Keystore, identity: Identity, report: @escaping @Sendable (HolderReport) -> Void) {
        self.keystore = keystore
        self.identity = identity
        self.report = report
    }

    /// How long an emergency wait held back after its end (``RelayRound``) waits before the
    /// watch reads the relays again for it, unless mail comes first.
    static let heldBackRetry: TimeInterval = 30

    /// Makes the watch take a pass now (a request was decided: its answer goes out).
    public func wake() { wakeup.signal() }

    /// How often the watch asks the relays for new groups and new versions of its groups
    /// (invitations are not pushed: a relay's waiting list wakes for messages only).
    static let groupRefresh: TimeInterval = 15

    /// Watches until cancelled.
    public func run() async {
        var refreshed: Date?
        var askAgain = false
        var unlisted = Set<HolderReport.Unlisted>()
        while !Task.isCancelled {
            let refresh = askAgain || refreshed.map { Date().timeIntervalSince($0) >= Self.groupRefresh } ?? true
            // Before the pass: what comes during it ends the wait below at once.
            let cursors = await RelayMail.latest(groups: HolderMail.mailGroups(keystore: keystore, identity: identity), identity: identity)
            var pass = await HolderMail.collect(keystore: keystore, identity: identity, refreshingGroups: refresh)
            if refresh { refreshed = Date() }
            // A message from a member the record held here does not name: the record is asked
            // for again at once (once), and the message taken then. Each is said once.
            askAgain = !refresh && !pass.waitingForRecord.isEmpty
            pass.waitingForRecord = pass.waitingForRecord.filter { unlisted.insert($0).inserted }
            await HolderMail.answerDecided(keystore: keystore, identity: identity, round: pass.round, report: &pass)
            if !pass.isEmpty { report(pass) }
            if askAgain { continue }
            // Until something arrives for this identity on any relay of its groups, a
            // decision here needs sending, an emergency wait here ends, or the groups are
            // due to be asked for again.
            let groups = HolderMail.mailGroups(keystore: keystore, identity: identity)
            let release = try? keystore.nextEmergencyRelease()
            let nextRefresh = (refreshed ?? Date()).addingTimeInterval(Self.groupRefresh)
            await withTaskGroup(of: Void.self) { waiting in
                let identity = identity
                waiting.addTask { await RelayMail.waitForMail(groups: groups, identity: identity, after: cursors, until: nextRefresh) }
                waiting.addTask { [wakeup] in await wakeup.wait() }
                if let release {
                    waiting.addTask {
                        // A wait that ended but was held back (its dealer's relays not read
                        // through) is tried again after a pause, not at once.
                        let now = VaultClock.now()
                        await VaultClock.sleep(until: release > now ? release : now.addingTimeInterval(HolderWatch.heldBackRetry))
                    }
                }
                _ = await waiting.next()
                waiting.cancelAll()
            }
        }
    }
}

/// A wake-up that is kept until waited for, and a wait that ends when its task is
/// cancelled. (An AsyncStream ends for good when the task reading it is cancelled: every
/// later wait would return at once.)
public final class Wakeup: @unchecked Sendable {
    private let lock = NSLock()
    private var pending = false
    private var waiter: CheckedContinuation<Void, Never>?
    private var cancelled = false

    /// A wake-up with nothing pending.
    public init() {}

    /// Ends the current wait, or the next one if none is under way.
    public func signal() {
        let waiting = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            defer { waiter = nil }
            if waiter == nil { pending = true }
            return waiter
        }
        waiting?.resume()
    }

    /// Returns at the next signal (at once if one is pending), or when the task is cancelled.
    public func wait() async {
        lock.withLock { cancelled = false }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = lock.withLock { () -> Bool in
                    if pending || cancelled {
                        pending = false
                        return true
                    }
                    waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiting = lock.withLock { () -> CheckedContinuation<Void, Never>? in
                cancelled = true
                defer { waiter = nil }
                return waiter
            }
            waiting?.resume()
        }
    }
}
