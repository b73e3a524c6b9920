import CSodium

/// Proof that a requester holds share j of a secret, bound to one Noise channel.
///
/// Requester j signs `"vault/v1/pop-proof" ‖ handshake hash ‖ secret id ‖ j ‖ i` with the
/// proof-of-possession key derived from its key share and commitment (Docs/FORMAT.md §9).
/// The handshake hash ties the proof to this channel: it can be neither replayed on
/// another connection nor relayed through a third party.
public enum PossessionProof {
    static func message(handshakeHash: [UInt8], secretID: [UInt8], requester: Int, holder: Int) -> [UInt8] {
        Array("vault/v1/pop-proof".utf8) + handshakeHash + secretID + [UInt8(requester), UInt8(holder)]
    }

    /// The requester's proof, to send to `holder` over the channel with `handshakeHash`.
    public static func make(for secret: StoredSecret, identity: Identity, holder: Int, handshakeHash: [UInt8]) throws(VaultError) -> [UInt8] {
        let header = secret.header
        let keyShare = try ShareBundle.openBox(secret.box, header: header, holder: identity)
        let (_, secretKey) = BundleHeader.possessionKeyPair(secretID: header.secretID, index: header.holderIndex,
                                                            keyShare: keyShare, commitment: header.commitments[header.holderIndex - 1])
        let message = message(handshakeHash: handshakeHash, secretID: header.secretID, requester: header.holderIndex, holder: holder)
        var signature = [UInt8](repeating: 0, count: Int(crypto_sign_BYTES))
        secretKey.withUnsafeBytes { sk in
            _ = crypto_sign_detached(&signature, nil, message, UInt64(message.count), sk.bindMemory(to: UInt8.self).baseAddress!)
        }
        return signature
    }

    /// Checks a proof that `requester` holds its share, made for this holder on this channel.
    public static func verify(_ proof: [UInt8], header: BundleHeader, requester: Int, handshakeHash: [UInt8]) -> Bool {
        guard requester >= 1, requester <= header.count, proof.count == Int(crypto_sign_BYTES) else { return false }
        let message = message(handshakeHash: handshakeHash, secretID: header.secretID, requester: requester, holder: header.holderIndex)
        return crypto_sign_verify_detached(proof, message, UInt64(message.count), header.possessionKeys[requester - 1]) == 0
    }
}
