import COpenSSL
import CSodium

/// HKDF-SHA-256 (RFC 5869) and PBKDF2-HMAC-SHA-256 (RFC 8018): the two derivations a
/// browser's WebCrypto offers, so that a share link's page derives exactly what vault does
/// (Docs/LINKS.md). Nothing else in vault uses them: its own keys come from BLAKE2b and
/// scrypt. HMAC-SHA-256 is public for the relay, which keys client addresses with it.
public enum KeyDerivation {
    /// HKDF-SHA-256 of `ikm` into `output` (at most 32 bytes: one block of Expand, all a
    /// link needs).
    static func hkdf(ikm: UnsafeRawBufferPointer, salt: [UInt8], info: [UInt8], into output: UnsafeMutableRawBufferPointer) {
        precondition(output.count <= 32)
        Sodium.ready
        let prk = SecureBytes(count: 32)
        prk.withUnsafeMutableBytes { prk in
            // Extract: PRK = HMAC(salt, IKM).
            salt.withUnsafeBytes { salt in hmac(key: salt, [ikm], into: prk) }
        }
        let block = SecureBytes(count: 32)
        prk.withUnsafeBytes { prk in
            block.withUnsafeMutableBytes { block in
                // Expand, first block: T(1) = HMAC(PRK, info ‖ 0x01).
                info.withUnsafeBytes { info in
                    [UInt8(1)].withUnsafeBytes { counter in hmac(key: prk, [info, counter], into: block) }
                }
                output.copyMemory(from: UnsafeRawBufferPointer(rebasing: block[..<output.count]))
            }
        }
    }

    /// PBKDF2-HMAC-SHA-256 of `password` into `output`.
    static func pbkdf2(password: UnsafeRawBufferPointer, salt: [UInt8], iterations: Int, into output: UnsafeMutableRawBufferPointer) {
        salt.withUnsafeBytes { pbkdf2(password: password, salt: $0, iterations: iterations, into: output) }
    }

    /// PBKDF2-HMAC-SHA-256 with a salt in locked memory (SLIP-39's rounds salt with half the
    /// secret).
    static func pbkdf2(password: UnsafeRawBufferPointer, salt: UnsafeRawBufferPointer, iterations: Int,
                       into output: UnsafeMutableRawBufferPointer) {
        var empty: UInt8 = 0
        let status = withUnsafeMutablePointer(to: &empty) { empty in
            PKCS5_PBKDF2_HMAC(password.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(password.count),
                              salt.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(empty), Int32(salt.count),
                              Int32(iterations), EVP_sha256(), Int32(output.count), output.bindMemory(to: UInt8.self).baseAddress)
        }
        precondition(status == 1, "OpenSSL failed to run PBKDF2")
    }

    /// HMAC-SHA-256 of `message` under `key` into `output` (32 bytes), all of them possibly
    /// secret (SLIP-39's digest share is keyed with random bytes over the shared secret).
    static func hmacSHA256(key: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) {
        Sodium.ready
        hmac(key: key, [message], into: output)
    }

    /// HMAC-SHA-256 of `message` under `key`.
    public static func hmacSHA256(key: SecureBytes, _ message: [UInt8]) -> [UInt8] {
        Sodium.ready
        var out = [UInt8](repeating: 0, count: 32)
        key.withUnsafeBytes { key in
            message.withUnsafeBytes { message in
                out.withUnsafeMutableBytes { hmac(key: key, [message], into: $0) }
            }
        }
        return out
    }

    private static func hmac(key: UnsafeRawBufferPointer, _ parts: [UnsafeRawBufferPointer], into output: UnsafeMutableRawBufferPointer) {
        precondition(output.count == 32)
        var state = crypto_auth_hmacsha256_state()
        defer { sodium_memzero(&state, MemoryLayout<crypto_auth_hmacsha256_state>.size) }
        // libsodium takes a pointer even for an empty key or part.
        var empty: UInt8 = 0
        withUnsafePointer(to: &empty) { empty in
            _ = crypto_auth_hmacsha256_init(&state, key.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? empty, key.count)
            for part in parts {
                _ = crypto_auth_hmacsha256_update(&state, part.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? empty, UInt64(part.count))
            }
        }
        _ = crypto_auth_hmacsha256_final(&state, output.bindMemory(to: UInt8.self).baseAddress!)
    }
}
