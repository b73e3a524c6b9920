import Dispatch
import Foundation

/// The second half of the dealer's pipeline: hashing, sealing and writing each stripe's n
/// piece segments, on other cores while the caller encrypts and disperses the next stripe.
///
/// Two buffer sets alternate. Stripes are processed in order, and within a stripe the n
/// pieces in parallel, so each piece's hasher and sealer still see their segments in
/// sequence and are only ever used by one thread at a time.
final class PieceStage: @unchecked Sendable {
    private let n: Int
    private let work: (Int, UnsafeRawBufferPointer) throws -> Void
    private let queue = DispatchQueue(label: "vault.piece-stage")
    private let free = DispatchSemaphore(value: 2)
    private let buffers: [UnsafeMutableRawPointer]
    private var lengths = [Int](repeating: 0, count: 2)
    private var next = 0
    private let lock = NSLock()
    private var failure: Error?

    /// `work(j, segment)` handles piece j's (0-based) next segment.
    init(n: Int, work: @escaping (Int, UnsafeRawBufferPointer) throws -> Void) {
        self.n = n
        self.work = work
        buffers = (0..<2).map { _ in .allocate(byteCount: n * Dispersal.segmentLength, alignment: 64) }
    }

    deinit {
        // Every queued block holds `self`, so no block is pending once this runs. Waiting on
        // the queue here would deadlock (a trap) whenever the last reference goes on the
        // queue itself: a failed write, for example, whose caller unwound first.
        buffers.forEach { $0.deallocate() }
    }

    /// Copies one stripe's n segments (equal lengths) and queues them. Throws a failure
    /// from an earlier stripe.
    func submit(_ segments: [UnsafeRawBufferPointer]) throws {
        try check()
        free.wait()
        let set = next
        next ^= 1
        let length = segments[0].count
        for (j, segment) in segments.enumerated() {
            (buffers[set] + j * Dispersal.segmentLength).copyMemory(from: segment.baseAddress!, byteCount: length)
        }
        lengths[set] = length
        queue.async { [self] in
            DispatchQueue.concurrentPerform(iterations: n) { j in
                guard lock.withLock({ failure == nil }) else { return }
                do {
                    try work(j, UnsafeRawBufferPointer(start: buffers[set] + j * Dispersal.segmentLength, count: lengths[set]))
                } catch {
                    lock.withLock { if failure == nil { failure = error } }
                }
            }
            free.signal()
        }
    }

    /// Waits for every queued stripe; throws the first failure.
    func finish() throws {
        queue.sync {}
        try check()
    }

    private func check() throws {
        if let failure = lock.withLock({ failure }) { throw failure }
    }
}
