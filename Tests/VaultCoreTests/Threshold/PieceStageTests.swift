import Foundation
import Testing
@testable import VaultCore

/// Issue 19: a full disk could crash `vault share` in PieceStage's deinit, which waited on
/// its own queue when the last reference went on that queue.
@Suite struct PieceStageTests {
    @Test func theLastReferenceMayGoOnTheStagesOwnQueue() throws {
        let started = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        weak var watched: PieceStage?
        do {
            let stage = PieceStage(n: 1) { _, _ in
                started.signal()
                release.wait()
                throw VaultError.fileSystem(path: "piece", reason: "No space left on device")
            }
            watched = stage
            try stage.reserve()[0].initializeMemory(as: UInt8.self, repeating: 7, count: 16)
            stage.submit(length: 16)
            started.wait()
        }
        // The caller has let go (as a share that failed elsewhere unwinds); the queued block
        // now holds the only reference, and drops it on the stage's queue.
        release.signal()
        let deadline = Date().addingTimeInterval(10)
        while watched != nil && Date() < deadline { usleep(10_000) }
        #expect(watched == nil)
    }
}
