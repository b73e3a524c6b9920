import Foundation
import Synchronization
import Testing
@testable import VaultRelayClient

/// The takes of one group refresh (GroupTakes) run in tasks of their own; a refresh that is
/// cancelled (a watch stopping mid-refresh) cancels them, rather than leaving each to run
/// to its end with nobody waiting for it.
struct GroupTakesTests {
    @Test func aCancelledRefreshCancelsItsTake() async throws {
        let takes = GroupTakes()
        let started = Wakeup()
        // Whether the take saw its cancellation (nil while it runs). Not timed: the tests'
        // shared pool may hold these tasks for many seconds while other tests run.
        let cancelled = Mutex<Bool?>(nil)
        let refresh = Task {
            await takes.once([1], owner: nil, version: 1) {
                started.signal()
                // A take that runs for 30 s unless it is cancelled.
                let slept: Void? = try? await Task.sleep(for: .seconds(30))
                cancelled.withLock { $0 = slept == nil }
                return (ReceiveReport(), nil)
            }
        }
        await started.wait()
        refresh.cancel()
        _ = await refresh.value
        #expect(cancelled.withLock { $0 } == true, "the take ran to its end after its refresh was cancelled")
    }
}
