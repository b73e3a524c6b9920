import Foundation

/// The steps that lanes (``DealLanes``, ``RecoveryLanes``) must take in chunk order, and
/// the first failure, which stops every lane.
///
/// The failure has a lock of its own: a lane asking whether to go on must not wait for
/// another lane's step in turn, which may be long (recovery writes its output there).
final class LaneOrder: @unchecked Sendable {
    private let turns = NSCondition()
    /// The next chunk whose step may run.
    private var turn: UInt64 = 0
    private let failureLock = NSLock()
    private var firstFailure: Error?

    /// The first failure, if any.
    var failure: Error? { failureLock.withLock { firstFailure } }

    /// Waits until every chunk before `first` has taken its step, then runs `step` for the
    /// `count` chunks from `first` on and lets the next ones go. Returns false without
    /// running it if a lane failed meanwhile, and false if `step` throws (its error becomes
    /// the failure, so failures, too, are taken in chunk order).
    func inTurn(_ first: UInt64, count: UInt64 = 1, _ step: () throws -> Void) -> Bool {
        turns.lock()
        defer { turns.unlock() }
        while turn != first && failure == nil { turns.wait() }
        guard failure == nil else { return false }
        var succeeded = true
        do {
            try step()
        } catch {
            record(error)
            succeeded = false
        }
        turn += count
        turns.broadcast()
        return succeeded
    }

    /// Stops every lane with `error`, unless one failed before.
    func fail(_ error: Error) {
        record(error)
        // Wakes the lanes waiting for a turn that will not come. Set first, then woken: a
        // lane that checked before the failure was set is waiting, and is woken here.
        turns.withLock { turns.broadcast() }
    }

    private func record(_ error: Error) {
        failureLock.withLock { if firstFailure == nil { firstFailure = error } }
    }
}
