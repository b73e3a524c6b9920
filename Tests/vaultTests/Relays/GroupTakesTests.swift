import Foundation
import Testing
@testable import VaultRelayClient

/// The takes of one group refresh (GroupTakes) run in tasks of their own; a refresh that is
/// cancelled (a watch stopping mid-refresh) cancels them, rather than leaving each to run
/// to its end with nobody waiting for it.
struct GroupTakesTests {
    @Test func aCancelledRefreshCancelsItsTake() async throws {
        let takes = GroupTakes()
        let clock = ContinuousClock()
        let refresh = Task {
            await takes.once([1], owner: nil, version: 1) {
                // A take that runs for 30 s unless it is cancelled.
                try? await Task.sleep(for: .seconds(30))
                return (ReceiveReport(), nil)
            }
        }
        try await Task.sleep(for: .milliseconds(200))
        let cancelled = clock.now
        refresh.cancel()
        _ = await refresh.value
        #expect(clock.now - cancelled < .seconds(10), "the refresh ended \(clock.now - cancelled) after it was cancelled")
    }
}
