import Dispatch

/// Runs async work off Swift's cooperative pool, on a thread of its own.
///
/// Swift Testing runs every test on the cooperative pool, one thread a core, and the
/// end-to-end tests hold theirs for as long as the vault processes they drive run. On 2
/// cores an in-process client then waited minutes between its steps: its requests reached
/// the relays too late to be taken (a test's `HolderMail.send` stored 0 or 1 of 3). Work
/// run here resumes on its own serial queue, which libdispatch gives a thread outside the
/// pool, so it goes at the pace of the relays it talks to.
public enum OwnThread {
    /// Runs `body` with a task executor of its own.
    public static func run<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        try await withTaskExecutorPreference(QueueExecutor()) { try await body() }
    }
}

/// A task executor over a serial dispatch queue.
private final class QueueExecutor: TaskExecutor, @unchecked Sendable {
    private let queue = DispatchQueue(label: "vault.tests.own-thread")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
