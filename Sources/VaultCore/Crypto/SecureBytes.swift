import CSodium

/// A buffer for secret key material.
///
/// The memory comes from `sodium_malloc`: pages of its own between guard pages, with a
/// canary, locked where the system allows it (so it is not swapped out), and zeroed when the
/// buffer is released. It is deliberately not
/// `CustomStringConvertible`, `Codable` or `Equatable`: the only ways to read it are the
/// scoped accessors below, and comparison must be ``constantTimeEquals(_:)``.
public final class SecureBytes {
    private let base: UnsafeMutableRawPointer
    /// The number of bytes.
    public let count: Int

    /// A zero-filled buffer of `count` bytes.
    public init(count: Int) {
        precondition(count >= 0)
        Sodium.ready
        self.count = count
        // Pages of its own: secrets sharing a locked page with others would be unlocked (and
        // could be swapped out) when a neighbour is freed. sodium_malloc still succeeds when
        // mlock fails under RLIMIT_MEMLOCK, and is nil only when mmap fails.
        guard let memory = sodium_malloc(max(count, 1)) else { fatalError("out of memory for secret bytes") }
        base = memory
        sodium_memzero(base, max(count, 1))
    }

    /// A locked copy of `bytes`. The caller remains responsible for wiping its own copy.
    public convenience init(copying bytes: some Collection<UInt8>) {
        self.init(count: bytes.count)
        let target = base.assumingMemoryBound(to: UInt8.self)
        for (offset, byte) in bytes.enumerated() { target[offset] = byte }
    }

    deinit {
        // sodium_free checks the canary, zeroes, unlocks and unmaps the pages.
        sodium_free(base)
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
