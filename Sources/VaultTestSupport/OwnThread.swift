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

    /// A task executor of its own thread, for an unstructured task that an API lets its
    /// caller place (``run(_:)``'s preference reaches only structured child tasks).
    public static func executor() -> any TaskExecutor { QueueExecutor() }

    /// Runs `body` on a thread of its own while every thread of Swift's shared pool is held
    /// by this call, at most `limit` seconds from `body`'s start: whatever `body` needs of
    /// the pool it cannot have until then. Returns `body`'s value and whether the pool was
    /// held throughout: no canary task, one a priority and one started outside any task (as
    /// a library's event loop starts one), ran before `body` ended. Throws when the pool's
    /// threads did not all come within `arrival` seconds.
    ///
    /// For a test run in a process of its own (scripts/test): among other tests, the pool's
    /// threads come free only as their tests end.
    public static func runHoldingThePool<T: Sendable>(limit: Double, arrival: Double = 30,
                                                     _ body: @escaping @Sendable () async throws -> T) async throws -> (value: T, held: Bool) {
        // The Swift runtime keeps a queue a priority, each as wide as the configured CPUs.
        let priorities = [TaskPriority(rawValue: 33), .high, .medium, .low, .background]
        let width = max(1, sysconf(Int32(_SC_NPROCESSORS_CONF)))
        let executor = QueueExecutor()
        return try await withCheckedThrowingContinuation { continuation in
            let hold = PoolHold<T>(width: width * priorities.count, finish: { continuation.resume(with: $0) })
            let start: @Sendable () -> Void = {
                for priority in priorities { Task.detached(priority: priority) { hold.canary() } }
                Thread { Task { hold.canary() } }.start()
                // Time for a canary to run, were there a free thread.
                Thread.sleep(forTimeInterval: 0.2)
                Task(executorPreference: executor, priority: .medium) {
                    do { hold.end(.success(try await body())) } catch { hold.end(.failure(error)) }
                }
            }
            for priority in priorities {
                for _ in 0..<width {
                    Task.detached(priority: priority) { hold.hold(limit: limit, arrival: arrival, start: start) }
                }
            }
        }
    }
}

/// The state of one ``OwnThread/runHoldingThePool(limit:arrival:_:)``.
private final class PoolHold<T: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private let width: Int
    private let created = ContinuousClock.now
    private var arrived = 0
    private var left = 0
    private var started: ContinuousClock.Instant?
    private var result: Result<T, Error>?
    private var releasedEarly = false
    private var canaryRan = false
    private var abandoned = false
    private var finish: ((Result<(value: T, held: Bool), Error>) -> Void)?

    init(width: Int, finish: @escaping (Result<(value: T, held: Bool), Error>) -> Void) {
        self.width = width
        self.finish = finish
    }

    /// Holds this thread until body ends, `limit` seconds after it started, or, when the
    /// others do not all come, `arrival` seconds after the call. The last to come runs
    /// `start`.
    func hold(limit: Double, arrival: Double, start: () -> Void) {
        let last: Bool = condition.withLock {
            guard !abandoned else { return false }
            arrived += 1
            if arrived == width { started = .now }
            return arrived == width
        }
        if last { start() }
        condition.lock()
        if abandoned && !last && started == nil { condition.unlock(); return }
        while result == nil && !abandoned {
            let now = ContinuousClock.now
            if let started {
                if now - started > .seconds(limit) { releasedEarly = true; break }
            } else if now - created > .seconds(arrival) {
                abandoned = true
                condition.broadcast()
                break
            }
            _ = condition.wait(until: Date().addingTimeInterval(0.05))
        }
        left += 1
        let call = handBack()
        condition.unlock()
        call?()
    }

    /// A task that ran while it should not have been able to.
    func canary() {
        condition.withLock { if result == nil { canaryRan = true } }
    }

    func end(_ result: Result<T, Error>) {
        condition.lock()
        self.result = result
        condition.broadcast()
        let call = handBack()
        condition.unlock()
        call?()
    }

    /// What to hand back, once, under the lock: a failure as soon as the holders are given
    /// up; else body's value once it ended and every holder let go (only then is the pool
    /// free for the caller).
    private func handBack() -> (() -> Void)? {
        guard let finish else { return nil }
        let outcome: Result<(value: T, held: Bool), Error>
        if abandoned {
            outcome = .failure(PoolNotHeld(description: "only \(arrived) of the pool's \(width) threads came"))
        } else if let result, left == width {
            outcome = result.map { (value: $0, held: !releasedEarly && !canaryRan) }
        } else {
            return nil
        }
        self.finish = nil
        return { finish(outcome) }
    }
}

/// The pool's threads did not all come.
private struct PoolNotHeld: Error, CustomStringConvertible {
    let description: String
}

/// A task executor over a serial dispatch queue.
private final class QueueExecutor: TaskExecutor, @unchecked Sendable {
    private let queue = DispatchQueue(label: "vault.tests.own-thread")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
