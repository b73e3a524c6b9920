import Dispatch
import Foundation

/// Runs async work off Swift's cooperative pool, on a thread of its own.
///
/// Swift Testing runs every test on the cooperative pool, one thread a core, and the
/// end-to-end tests hold theirs for as long as the vault processes they drive run. On 2
/// cores an in-process client then waited minutes between its steps. Work run here resumes
/// on its own serial queue, which libdispatch gives a thread outside the pool (measured: at
/// once, with the pool and 64 global-queue threads held), so it goes at the pace of the
/// relays it talks to. Unstructured tasks that libraries start do not inherit it: those
/// still need the pool (AsyncHTTPClient's pull of a streamed request body is one).
public enum OwnThread {
    /// Runs `body` with a task executor of its own.
    public static func run<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        try await withTaskExecutorPreference(QueueExecutor()) { try await body() }
    }

    /// Runs `body` on a thread of its own while every thread of the cooperative pool (one a
    /// core, for each priority) is held by this call, at most `limit` seconds from `body`'s start: whatever
    /// `body` needs of the pool it cannot have until then. Returns `body`'s value and
    /// whether it ended while the pool was held.
    ///
    /// For a test run in a process of its own (scripts/test): among other tests, the pool's
    /// threads come free only as their tests end.
    public static func runHoldingThePool<T: Sendable>(limit: Double,
                                                     _ body: @escaping @Sendable () async throws -> T) async throws -> (value: T, held: Bool) {
        // libdispatch keeps a pool a priority (measured: with .high's held, .medium's and
        // .low's tasks ran at once), so every one is held.
        let priorities: [TaskPriority] = [.high, .medium, .low, .background]
        let width = ProcessInfo.processInfo.activeProcessorCount
        let hold = PoolHold<T>(width: width * priorities.count)
        let executor = QueueExecutor()
        return try await withCheckedThrowingContinuation { continuation in
            hold.finish = { continuation.resume(with: $0) }
            for priority in priorities {
                for _ in 0..<width {
                    Task.detached(priority: priority) {
                        // The last to arrive holds the whole pool with the others: body starts.
                        if hold.arrive() {
                            Task(executorPreference: executor) {
                                do { hold.end(.success(try await body())) } catch { hold.end(.failure(error)) }
                            }
                        }
                        hold.wait(limit: limit)
                    }
                }
            }
        }
    }
}

/// The state of one ``OwnThread/runHoldingThePool(limit:_:)``.
private final class PoolHold<T: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private let width: Int
    private var arrived = 0
    private var left = 0
    private var started: ContinuousClock.Instant?
    private var result: Result<T, Error>?
    private var releasedEarly = false
    var finish: ((Result<(value: T, held: Bool), Error>) -> Void)?

    init(width: Int) { self.width = width }

    /// Counts one holder in; true for the last.
    func arrive() -> Bool {
        condition.withLock {
            arrived += 1
            if arrived == width { started = .now }
            return arrived == width
        }
    }

    /// Holds this thread until body ends, or `limit` seconds after it started.
    func wait(limit: Double) {
        condition.lock()
        while result == nil {
            if let started, ContinuousClock.now - started > .seconds(limit) { releasedEarly = true; break }
            _ = condition.wait(until: Date().addingTimeInterval(0.05))
        }
        left += 1
        condition.unlock()
        handBack()
    }

    func end(_ result: Result<T, Error>) {
        condition.withLock {
            self.result = result
            condition.broadcast()
        }
        handBack()
    }

    /// Once body ended and every holder let go (only then is the pool free for the caller),
    /// hands body's value back, once.
    private func handBack() {
        let call: (() -> Void)? = condition.withLock {
            guard left == width, let result, let finish else { return nil }
            self.finish = nil
            let outcome = result.map { (value: $0, held: !releasedEarly) }
            return { finish(outcome) }
        }
        call?()
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
