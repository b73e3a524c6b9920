import VaultCore

/// Noise's SymmetricState: the chaining key, the handshake hash and a CipherState.
struct NoiseSymmetricState {
    private var chainingKey: [UInt8]
    private(set) var handshakeHash: [UInt8]
    private var cipher = NoiseCipherState()

    /// A name of at most 64 bytes is zero-padded to form the first hash; a longer one is hashed.
    init(protocolName: String) {
        let name = Array(protocolName.utf8)
        handshakeHash = name.count <= NoiseCrypto.hashLength
            ? name + [UInt8](repeating: 0, count: NoiseCrypto.hashLength - name.count)
            : NoiseCrypto.hash(name)
        chainingKey = handshakeHash
    }

    var hasKey: Bool { cipher.hasKey }

    mutating func mixKey(_ input: SecureBytes) {
        let outputs = input.withUnsafeBytes { NoiseCrypto.hkdf(chainingKey: chainingKey, ikm: Array($0), outputs: 2) }
        chainingKey.wipe()
        chainingKey = outputs[0]
        cipher = NoiseCipherState(key: SecureBytes(copying: outputs[1].prefix(NoiseCrypto.keyLength)))
    }

    mutating func mixHash(_ data: [UInt8]) {
        handshakeHash = NoiseCrypto.hash(handshakeHash, data)
    }

    mutating func encryptAndHash(_ plaintext: [UInt8]) throws(NetError) -> [UInt8] {
        let ciphertext = try cipher.encrypt(ad: handshakeHash, plaintext: plaintext)
        mixHash(ciphertext)
        return ciphertext
    }

    mutating func decryptAndHash(_ ciphertext: [UInt8]) throws(NetError) -> [UInt8] {
        let plaintext = try cipher.decrypt(ad: handshakeHash, ciphertext: ciphertext)
        mixHash(ciphertext)
        return plaintext
    }

    /// The two transport CipherStates: initiator-to-responder first. The chaining key is
    /// wiped: nothing more is derived from it.
    mutating func split() -> (NoiseCipherState, NoiseCipherState) {
        let outputs = NoiseCrypto.hkdf(chainingKey: chainingKey, ikm: [], outputs: 2)
        chainingKey.wipe()
        return (NoiseCipherState(key: SecureBytes(copying: outputs[0].prefix(NoiseCrypto.keyLength))),
                NoiseCipherState(key: SecureBytes(copying: outputs[1].prefix(NoiseCrypto.keyLength))))
    }
}
