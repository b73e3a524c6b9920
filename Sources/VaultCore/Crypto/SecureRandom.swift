import CSodium

/// A source of random bytes.
///
/// Production code uses ``SecureRandom``, the only door to `randombytes_buf`. Tests may pass
/// a seeded generator from VaultTestSupport to make vectors reproducible; the CLI never can.
public protocol RandomSource: Sendable {
    /// Fills `buffer` with random bytes.
    func fill(_ buffer: UnsafeMutableRawBufferPointer)
}

/// The operating system's CSPRNG, through libsodium's `randombytes_buf`.
public struct SecureRandom: RandomSource {
    public init() {}

    public func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        Sodium.ready
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        randombytes_buf(base, buffer.count)
    }
}

extension SecureBytes {
    /// `count` bytes from ``SecureRandom``, in locked memory: for keys.
    public static func random(count: Int) -> SecureBytes { SecureRandom().secureBytes(count) }
}

extension RandomSource {
    /// `count` fresh random bytes, in an ordinary array: for public values such as ids and nonces.
    public func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { fill($0) }
        return out
    }

    /// `count` fresh random bytes in locked memory: for keys.
    func secureBytes(_ count: Int) -> SecureBytes {
        let out = SecureBytes(count: count)
        out.withUnsafeMutableBytes { fill($0) }
        return out
    }
}
