import Foundation

/// Cancels the server's task on SIGINT or SIGTERM, also when the signal came before the
/// task existed.
final class StopSignal: @unchecked Sendable {
    private let lock = NSLock()
    private var task: Task<Void, Error>?
    private var fired = false

    func fire() {
        lock.withLock { () -> Task<Void, Error>? in
            fired = true
            return task
        }?.cancel()
    }

    func attach(_ task: Task<Void, Error>) {
        if lock.withLock({ () -> Bool in
            self.task = task
            return fired
        }) { task.cancel() }
    }
}
