import CSodium
import VaultCore

/// The Noise functions for 25519_ChaChaPoly_BLAKE2b, each from libsodium.
enum NoiseCrypto {
    static let dhLength = 32
    static let hashLength = 64
    static let blockLength = 128
    static let keyLength = 32

    /// A fresh key pair: (secret, public).
    static func generateKeyPair() -> (SecureBytes, [UInt8]) {
        let secret = SecureBytes.random(count: dhLength)
        return (secret, publicKey(of: secret))
    }

    static func publicKey(of secret: SecureBytes) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: dhLength)
        secret.withUnsafeBytes { _ = crypto_scalarmult_base(&out, $0.bindMemory(to: UInt8.self).baseAddress!) }
        return out
    }

    /// X25519. libsodium refuses an all-zero result, as the spec requires.
    static func dh(_ secret: SecureBytes, _ publicKey: [UInt8]) throws(NetError) -> SecureBytes {
        let out = SecureBytes(count: dhLength)
        let status = out.withUnsafeMutableBytes { o in
            secret.withUnsafeBytes { s in
                crypto_scalarmult(o.bindMemory(to: UInt8.self).baseAddress!, s.bindMemory(to: UInt8.self).baseAddress!, publicKey)
            }
        }
        guard status == 0 else { throw .weakKey }
        return out
    }

    /// ChaCha20-Poly1305 (IETF) with the nonce 4 zero bytes ‖ 64-bit little-endian counter.
    static func encrypt(key: SecureBytes, nonce: UInt64, ad: [UInt8], plaintext: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: plaintext.count + NetLimits.noiseTagLength)
        var length: UInt64 = 0
        let iv = nonceBytes(nonce)
        key.withUnsafeBytes { k in
            _ = crypto_aead_chacha20poly1305_ietf_encrypt(
                &out, &length, plaintext, UInt64(plaintext.count), ad, UInt64(ad.count), nil, iv,
                k.bindMemory(to: UInt8.self).baseAddress!)
        }
        return out
    }

    static func decrypt(key: SecureBytes, nonce: UInt64, ad: [UInt8], ciphertext: [UInt8]) throws(NetError) -> [UInt8] {
        guard ciphertext.count >= NetLimits.noiseTagLength else { throw .decryption }
        var out = [UInt8](repeating: 0, count: ciphertext.count - NetLimits.noiseTagLength)
        var length: UInt64 = 0
        let iv = nonceBytes(nonce)
        let status = key.withUnsafeBytes { k in
            crypto_aead_chacha20poly1305_ietf_decrypt(
                &out, &length, nil, ciphertext, UInt64(ciphertext.count), ad, UInt64(ad.count), iv,
                k.bindMemory(to: UInt8.self).baseAddress!)
        }
        guard status == 0 else { throw .decryption }
        return out
    }

    private static func nonceBytes(_ counter: UInt64) -> [UInt8] {
        [0, 0, 0, 0] + (0..<8).map { UInt8(truncatingIfNeeded: counter >> (8 * UInt64($0))) }
    }

    /// Unkeyed BLAKE2b-512 over the concatenation of `parts`.
    static func hash(_ parts: [UInt8]...) -> [UInt8] { hash(parts) }

    static func hash(_ parts: [[UInt8]]) -> [UInt8] {
        // The state type is over-aligned and not imported: raw memory, 64-byte aligned.
        let state = UnsafeMutableRawPointer.allocate(byteCount: crypto_generichash_statebytes(), alignment: 64)
        defer { state.deallocate() }
        var out = [UInt8](repeating: 0, count: hashLength)
        _ = crypto_generichash_init(OpaquePointer(state), nil, 0, hashLength)
        for part in parts { _ = crypto_generichash_update(OpaquePointer(state), part, UInt64(part.count)) }
        _ = crypto_generichash_final(OpaquePointer(state), &out, hashLength)
        return out
    }

    /// HMAC (RFC 2104) over unkeyed BLAKE2b with its 128-byte block. BLAKE2b's own keyed
    /// mode gives different output and is not what Noise specifies.
    static func hmac(key: [UInt8], _ parts: [UInt8]...) -> [UInt8] {
        precondition(key.count <= blockLength)
        let padded = key + [UInt8](repeating: 0, count: blockLength - key.count)
        let inner = hash([padded.map { $0 ^ 0x36 }] + parts)
        return hash(padded.map { $0 ^ 0x5c }, inner)
    }

    /// HKDF with two or three outputs: t = HMAC(ck, ikm), o1 = HMAC(t, 1),
    /// o2 = HMAC(t, o1 ‖ 2), o3 = HMAC(t, o2 ‖ 3).
    static func hkdf(chainingKey: [UInt8], ikm: [UInt8], outputs: Int) -> [[UInt8]] {
        let temp = hmac(key: chainingKey, ikm)
        var result = [hmac(key: temp, [1])]
        for i in 2...outputs { result.append(hmac(key: temp, result[i - 2], [UInt8(i)])) }
        return result
    }
}
