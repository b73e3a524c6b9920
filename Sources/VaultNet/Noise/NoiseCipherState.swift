import VaultCore

/// Noise's CipherState: a key (or none yet) and a 64-bit counter.
struct NoiseCipherState {
    private(set) var key: SecureBytes?
    private(set) var nonce: UInt64 = 0

    init(key: SecureBytes? = nil) { self.key = key }

    var hasKey: Bool { key != nil }

    mutating func encrypt(ad: [UInt8], plaintext: [UInt8]) throws(NetError) -> [UInt8] {
        guard let key else { return plaintext }
        // 2^64 - 1 is reserved; a session that long is refused rather than reusing a nonce.
        guard nonce < UInt64.max else { throw .nonceExhausted }
        defer { nonce += 1 }
        return NoiseCrypto.encrypt(key: key, nonce: nonce, ad: ad, plaintext: plaintext)
    }

    mutating func decrypt(ad: [UInt8], ciphertext: [UInt8]) throws(NetError) -> [UInt8] {
        guard let key else { return ciphertext }
        guard nonce < UInt64.max else { throw .nonceExhausted }
        // The counter advances only when the message authenticates.
        let plaintext = try NoiseCrypto.decrypt(key: key, nonce: nonce, ad: ad, ciphertext: ciphertext)
        nonce += 1
        return plaintext
    }
}
