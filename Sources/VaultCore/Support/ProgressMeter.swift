import Synchronization

/// Counts the bytes a long piece of work has done, against the bytes it expects, for a
/// progress display that reads it from another thread.
///
/// The work only adds to two atomics; whoever shows progress polls ``completed`` and
/// ``expected`` at its own pace, so a meter costs the hot loops nothing worth measuring and
/// never calls out of them.
public final class ProgressMeter: Sendable {
    /// What the display calls this work ("alice", "encrypting").
    public let name: String
    private let done = Atomic<UInt64>(0)
    private let total = Atomic<UInt64>(0)

    /// A meter expecting `total` bytes (0: not known yet).
    public init(_ name: String, total: UInt64 = 0) {
        self.name = name
        self.total.store(total, ordering: .relaxed)
    }

    /// Adds `bytes` to the work expected.
    public func expect(_ bytes: UInt64) { total.add(bytes, ordering: .relaxed) }

    /// Records `bytes` more done.
    public func advance(_ bytes: Int) { done.add(UInt64(max(0, bytes)), ordering: .relaxed) }

    /// Bytes done so far.
    public var completed: UInt64 { done.load(ordering: .relaxed) }

    /// Bytes expected in all; 0 when unknown (standard input, say).
    public var expected: UInt64 { total.load(ordering: .relaxed) }
}

/// A source whose reads advance a meter: the bytes a command consumes are its progress.
public struct MeteredSource: ByteSource {
    private var source: any ByteSource
    private let meter: ProgressMeter?

    /// Reads `source`, advancing `meter` (if any) by every byte read.
    public init(_ source: any ByteSource, meter: ProgressMeter?) {
        self.source = source
        self.meter = meter
    }

    public mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let count = try source.read(into: buffer)
        meter?.advance(count)
        return count
    }
}
