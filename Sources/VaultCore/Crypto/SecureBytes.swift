import CSodium

/// A buffer for secret key material.
///
/// The memory is locked where the system allows it (so it is not swapped out), kept out of
/// core dumps, and zeroed when the buffer is released. Up to ``SecretArena/slotLength``
/// bytes come from a slot of ``SecretArena``; larger buffers from `sodium_malloc`, with
/// pages of their own between guard pages and a canary. It is deliberately not
/// `CustomStringConvertible`, `Codable` or `Equatable`: the only ways to read it are the
/// scoped accessors below, and comparison must be ``constantTimeEquals(_:)``.
public final class SecureBytes {
    private let base: UnsafeMutableRawPointer
    /// The number of bytes.
    public let count: Int
    /// Whether `base` is a slot of the shared arena rather than `sodium_malloc`'s.
    private let inArena: Bool

    /// A zero-filled buffer of `count` bytes.
    public init(count: Int) {
        precondition(count >= 0)
        Sodium.ready
        self.count = count
        inArena = count <= SecretArena.slotLength
        if inArena {
            base = SecretArena.shared.allocate()
            return
        }
        // Pages of its own: larger buffers are few (stream chunks, a passphrase file), and
        // their guard pages catch overruns. sodium_malloc still succeeds when mlock fails
        // under RLIMIT_MEMLOCK, and is nil only when mmap fails.
        guard let memory = sodium_malloc(count) else { fatalError("out of memory for secret bytes") }
        base = memory
        sodium_memzero(base, count)
    }

    /// A locked copy of `bytes`. The caller remains responsible for wiping its own copy.
    public convenience init(copying bytes: some Collection<UInt8>) {
        self.init(count: bytes.count)
        let target = base.assumingMemoryBound(to: UInt8.self)
        for (offset, byte) in bytes.enumerated() { target[offset] = byte }
    }

    deinit {
        if inArena {
            SecretArena.shared.release(base)
        } else {
            // sodium_free checks the canary, zeroes, unlocks and unmaps the pages.
            sodium_free(base)
        }
    }

    /// Reads the bytes inside `body`. The pointer must not escape.
    public func withUnsafeBytes<R, E: Error>(
        _ body: (UnsafeRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Writes the bytes inside `body`. The pointer must not escape.
    public func withUnsafeMutableBytes<R, E: Error>(
        _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        try body(UnsafeMutableRawBufferPointer(start: base, count: count))
    }

    /// Compares in constant time.
    public func constantTimeEquals(_ other: SecureBytes) -> Bool {
        count == other.count && sodium_memcmp(base, other.base, count) == 0
    }

    /// A new buffer holding bytes `range` of this one.
    func slice(_ range: Range<Int>) -> SecureBytes {
        precondition(range.lowerBound >= 0 && range.upperBound <= count)
        let out = SecureBytes(count: range.count)
        out.base.copyMemory(from: base + range.lowerBound, byteCount: range.count)
        return out
    }
}

extension Array where Element == UInt8 {
    /// Overwrites every byte with zero through `sodium_memzero`, which the compiler may not
    /// elide as a dead store (a plain loop or `initializeMemory` before a release may be).
    public mutating func wipe() {
        withUnsafeMutableBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            sodium_memzero(base, bytes.count)
        }
    }
}
