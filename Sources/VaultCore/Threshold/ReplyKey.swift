import CSodium

/// The one-time X25519 key pair of one piece request through relays (Docs/FORMAT.md §20).
///
/// A holder seals its released piece to the request's public half, so only whoever made
/// that request opens it: a relay, or anyone who redirects the answer, holds sealed bytes
/// only. The secret half lives in locked memory, and at rest only sealed under a key of this
/// identity (``Keystore``'s recovery tables), until the recovery ends.
public struct ReplyKey: @unchecked Sendable {
    /// The X25519 public key the request carries.
    public let publicKey: [UInt8]
    let secretKey: SecureBytes

    /// A fresh pair.
    package init(random: some RandomSource = SecureRandom()) {
        let pair = OneTimeKey(random: random)
        publicKey = pair.publicKey
        secretKey = pair.secretKey
    }

    private init(publicKey: [UInt8], secretKey: SecureBytes) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// The secret half sealed for the keystore: `crypto_secretbox` under a key derived from
    /// `identity`'s X25519 secret, so a copy of the keystore opens nothing without it (and
    /// its passphrase, where it has one).
    package func sealed(for identity: Identity, random: some RandomSource = SecureRandom()) -> [UInt8] {
        let key = Self.sealingKey(identity)
        let nonce = random.bytes(Int(crypto_secretbox_NONCEBYTES))
        var box = [UInt8](repeating: 0, count: secretKey.count + Int(crypto_secretbox_MACBYTES))
        secretKey.withUnsafeBytes { m in
            key.withUnsafeBytes { k in
                _ = crypto_secretbox_easy(&box, m.bindMemory(to: UInt8.self).baseAddress!, UInt64(m.count), nonce,
                                          k.bindMemory(to: UInt8.self).baseAddress!)
            }
        }
        return nonce + box
    }

    /// Opens what ``sealed(for:random:)`` made; nil when it does not open (another identity's).
    package static func unsealed(_ sealed: [UInt8], publicKey: [UInt8], identity: Identity) -> ReplyKey? {
        let nonceLength = Int(crypto_secretbox_NONCEBYTES), mac = Int(crypto_secretbox_MACBYTES)
        guard sealed.count == nonceLength + Int(crypto_box_SECRETKEYBYTES) + mac, publicKey.count == 32 else { return nil }
        let key = sealingKey(identity)
        let secret = SecureBytes(count: Int(crypto_box_SECRETKEYBYTES))
        let nonce = Array(sealed[0..<nonceLength]), box = Array(sealed[nonceLength...])
        let status = secret.withUnsafeMutableBytes { out in
            key.withUnsafeBytes { k in
                crypto_secretbox_open_easy(out.bindMemory(to: UInt8.self).baseAddress!, box, UInt64(box.count), nonce,
                                           k.bindMemory(to: UInt8.self).baseAddress!)
            }
        }
        guard status == 0 else { return nil }
        // The public half must be the secret's own: a row altered on disk opens nothing.
        var derived = [UInt8](repeating: 0, count: 32)
        secret.withUnsafeBytes { _ = crypto_scalarmult_base(&derived, $0.bindMemory(to: UInt8.self).baseAddress!) }
        guard Sodium.equal(derived, publicKey) else { return nil }
        return ReplyKey(publicKey: publicKey, secretKey: secret)
    }

    /// BLAKE2b-256 keyed by the identity's X25519 secret over a domain string, computed in
    /// locked memory: neither the secret nor the key passes through an ordinary array.
    private static func sealingKey(_ identity: Identity) -> SecureBytes {
        let key = SecureBytes(count: 32)
        let domain = Array("vault/v1/reply-key-seal".utf8)
        key.withUnsafeMutableBytes { out in
            identity.agreementSecret.withUnsafeBytes { secret in
                _ = crypto_generichash(out.bindMemory(to: UInt8.self).baseAddress!, 32, domain, UInt64(domain.count),
                                       secret.bindMemory(to: UInt8.self).baseAddress!, secret.count)
            }
        }
        return key
    }
}
