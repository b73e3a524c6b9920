/// Gathers a stream's bytes into a buffer of fixed capacity (a chunk) and hands it on,
/// full, only when more bytes arrive. What comes last, full or short, stays behind until
/// the end of input is known: that is what lets a sealer mark the last chunk and an opener
/// demand the mark there. The secretstream (§7) uses it on both sides.
///
/// The buffer holds plaintext on the sealing side, so it comes from `sodium_malloc`: locked
/// where the system allows, and zeroed when released.
final class ChunkAccumulator {
    private let buffer: SecureBytes
    /// The bytes held.
    private(set) var count = 0

    init(capacity: Int) { buffer = SecureBytes(count: capacity) }

    /// Whether the buffer is full.
    var isFull: Bool { count == buffer.count }

    /// Adds `bytes`, handing the full buffer to `full` each time more bytes remain.
    func append(_ bytes: UnsafeRawBufferPointer, full: (UnsafeRawBufferPointer) throws -> Void) throws {
        var offset = 0
        while offset < bytes.count {
            if isFull { try drain(full) }
            let take = min(bytes.count - offset, buffer.count - count)
            buffer.withUnsafeMutableBytes { ($0.baseAddress! + count).copyMemory(from: bytes.baseAddress! + offset, byteCount: take) }
            count += take
            offset += take
        }
    }

    /// Hands what is held to `body` and empties the accumulator.
    func drain(_ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        defer { count = 0 }
        try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
    }
}
