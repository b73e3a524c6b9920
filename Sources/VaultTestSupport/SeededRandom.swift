import CSodium
import Foundation
import VaultCore

/// A deterministic ``RandomSource`` for test vectors: each request is filled by libsodium's
/// `randombytes_buf_deterministic` under BLAKE2b(seed ‖ request number), so the same seed
/// gives the same sequence of values.
public final class SeededRandom: RandomSource, @unchecked Sendable {
    private let seed: [UInt8]
    private var counter: UInt64 = 0
    private let lock = NSLock()

    /// A generator for `seed` (any text).
    public init(seed: String) {
        _ = sodium_init()
        self.seed = Array(seed.utf8)
    }

    public func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        let request = lock.withLock { () -> UInt64 in
            defer { counter += 1 }
            return counter
        }
        var key = [UInt8](repeating: 0, count: Int(randombytes_SEEDBYTES))
        let input = seed + withUnsafeBytes(of: request.littleEndian, Array.init)
        crypto_generichash(&key, key.count, input, UInt64(input.count), nil, 0)
        randombytes_buf_deterministic(base, buffer.count, key)
    }
}
