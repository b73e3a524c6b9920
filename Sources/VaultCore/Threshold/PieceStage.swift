import Dispatch
import Foundation

/// The second half of a pipeline over pieces, on other cores while the caller works on the
/// next stripe in another buffer set: the dealer hashes and writes each stripe's n piece
/// segments; recovery hashes the k piece segments it has just read.
///
/// Three buffer sets take turns. Stripes are processed in order, and within a stripe the
/// pieces in parallel (or one after another, with `concurrent` false), so each piece's
/// hasher and file still see their segments in sequence and are only ever used by one
/// thread at a time.
final class PieceStage: @unchecked Sendable {
    /// Buffer sets in flight: one being encoded while two wait for, or are in, the stage.
    static let sets = 3
    private let n: Int
    private let concurrent: Bool
    private let work: (Int, UnsafeRawBufferPointer) throws -> Void
    private let queue = DispatchQueue(label: "vault.piece-stage")
    /// Free buffer sets. Created at 0 and signalled up to ``sets``: a semaphore freed below
    /// its initial value traps, and a caller that throws between ``reserve()`` and
    /// ``submit(length:)`` (a truncated piece) leaves one set taken.
    private let free = DispatchSemaphore(value: 0)
    private let buffers: [UnsafeMutableRawPointer]
    private var next = 0
    private let lock = NSLock()
    private var failure: Error?

    /// `work(j, segment)` handles piece j's (0-based) next segment; with `concurrent`, the
    /// pieces of a stripe at once, on as many cores as there are.
    init(n: Int, concurrent: Bool = true, work: @escaping (Int, UnsafeRawBufferPointer) throws -> Void) {
        self.n = n
        self.concurrent = concurrent
        self.work = work
        buffers = (0..<Self.sets).map { _ in .allocate(byteCount: n * Dispersal.maximumSegmentLength, alignment: 64) }
        for _ in 0..<Self.sets { free.signal() }
    }

    deinit {
        // Every queued block holds `self`, so no block is pending once this runs. Waiting on
        // the queue here would deadlock (a trap) whenever the last reference goes on the
        // queue itself: a failed write, for example, whose caller unwound first.
        buffers.forEach { $0.deallocate() }
    }

    /// The n buffers (``Dispersal/maximumSegmentLength`` bytes each) to encode the next stripe
    /// into, once the stage is done with them; ``submit(length:)`` queues them. Throws a
    /// failure from an earlier stripe.
    func reserve() throws -> [UnsafeMutableRawPointer] {
        try check()
        free.wait()
        return (0..<n).map { buffers[next] + $0 * Dispersal.maximumSegmentLength }
    }

    /// Queues the stripe encoded into the buffers ``reserve()`` gave, each segment `length`
    /// bytes.
    func submit(length: Int) {
        let set = next
        next = (next + 1) % Self.sets
        queue.async { [self] in
            let piece: @Sendable (Int) -> Void = { [self] j in
                guard lock.withLock({ failure == nil }) else { return }
                do {
                    try work(j, UnsafeRawBufferPointer(start: buffers[set] + j * Dispersal.maximumSegmentLength, count: length))
                } catch {
                    lock.withLock { if failure == nil { failure = error } }
                }
            }
            if concurrent {
                DispatchQueue.concurrentPerform(iterations: n, execute: piece)
            } else {
                (0..<n).forEach(piece)
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
