import CSodium

/// libsodium must be initialised once before any primitive runs. Every public entry point
/// that touches a primitive goes through `Sodium.ready`, which is lazy and thread-safe.
package enum Sodium {
    package static let ready: Void = {
        // sodium_init returns 1 when already initialised, -1 only if no entropy source exists;
        // running without randomness would be worse than stopping.
        precondition(sodium_init() >= 0, "libsodium could not be initialised")
    }()

    /// BLAKE2b with an optional key, over the concatenation of `parts`. Used for every
    /// domain-separated hash; the key is the domain ("vault/v1/...").
    package static func blake2b(outputLength: Int = 32, key: String? = nil, _ parts: [UInt8]...) -> [UInt8] {
        Sodium.ready
        // The state type is over-aligned and not imported; give libsodium raw, aligned memory.
        let stateMemory = UnsafeMutableRawPointer.allocate(byteCount: crypto_generichash_statebytes(), alignment: 64)
        defer {
            sodium_memzero(stateMemory, crypto_generichash_statebytes())
            stateMemory.deallocate()
        }
        let state = OpaquePointer(stateMemory)
        let keyBytes = key.map { Array($0.utf8) } ?? []
        precondition(keyBytes.count <= Int(crypto_generichash_KEYBYTES_MAX))
        keyBytes.withUnsafeBufferPointer { k in
            _ = crypto_generichash_init(state, k.baseAddress, k.count, outputLength)
        }
        for part in parts {
            part.withUnsafeBufferPointer { p in
                _ = crypto_generichash_update(state, p.baseAddress, UInt64(p.count))
            }
        }
        var out = [UInt8](repeating: 0, count: outputLength)
        _ = crypto_generichash_final(state, &out, outputLength)
        return out
    }

    /// Streaming BLAKE2b-256 under a domain key, for data that does not fit in memory.
    package final class Blake2b {
        private let state: UnsafeMutableRawPointer

        package init(key: String) {
            Sodium.ready
            state = .allocate(byteCount: crypto_generichash_statebytes(), alignment: 64)
            let keyBytes = Array(key.utf8)
            _ = crypto_generichash_init(OpaquePointer(state), keyBytes, keyBytes.count, 32)
        }

        deinit {
            sodium_memzero(state, crypto_generichash_statebytes())
            state.deallocate()
        }

        package func update(_ bytes: UnsafeRawBufferPointer) {
            _ = crypto_generichash_update(OpaquePointer(state), bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count))
        }

        package func finish() -> [UInt8] {
            var out = [UInt8](repeating: 0, count: 32)
            _ = crypto_generichash_final(OpaquePointer(state), &out, 32)
            return out
        }

        /// Finishes into `output` (32 bytes), for a hash that is a key: locked memory the
        /// caller wipes, never an ordinary array.
        package func finish(into output: UnsafeMutableRawBufferPointer) {
            precondition(output.count == 32)
            _ = crypto_generichash_final(OpaquePointer(state), output.bindMemory(to: UInt8.self).baseAddress!, 32)
        }
    }

    /// Constant-time equality for secrets and MACs.
    package static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return sodium_memcmp(a, b, a.count) == 0
    }
}

extension Array where Element == UInt8 {
    /// Equality in constant time (``Sodium/equal(_:_:)``), for MACs and hashes of secrets.
    public func constantTimeEquals(_ other: [UInt8]) -> Bool { Sodium.equal(self, other) }
}
