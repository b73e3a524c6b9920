import CSodium

/// This machine's identity with its private keys open in locked memory.
///
/// The two key pairs are independent: X25519 for agreement, Ed25519 for signatures.
/// The stored secret is the X25519 secret key (32) followed by the Ed25519 seed (32).
///
/// Sendable: every stored property is a constant set in `init`, and the key buffers are only
/// read afterwards (libsodium's signing and agreement calls do not write their keys).
public final class Identity: @unchecked Sendable {
    /// The identity's label.
    public let label: Label
    /// The public half.
    public let card: KeyCard
    let agreementSecret: SecureBytes
    /// libsodium's 64-byte Ed25519 secret key (seed ‖ public key).
    let signingSecret: SecureBytes

    static let secretLength = 64

    /// Rebuilds the identity from its stored secret and checks it against `card`, so that
    /// keys swapped or damaged in the keystore are caught before they are used.
    init(label: Label, card expected: KeyCard?, secret: SecureBytes) throws(VaultError) {
        guard secret.count == Self.secretLength else {
            throw .keystoreCorrupt("private keys have the wrong length")
        }
        Sodium.ready
        let agreementSecret = secret.slice(0..<32)
        let signingSecret = SecureBytes(count: Int(crypto_sign_SECRETKEYBYTES))
        var agreementPublic = [UInt8](repeating: 0, count: 32)
        var signingPublic = [UInt8](repeating: 0, count: 32)
        agreementSecret.withUnsafeBytes { sk in
            _ = crypto_scalarmult_base(&agreementPublic, sk.bindMemory(to: UInt8.self).baseAddress!)
        }
        secret.withUnsafeBytes { all in
            signingSecret.withUnsafeMutableBytes { sk in
                _ = crypto_sign_seed_keypair(
                    &signingPublic, sk.bindMemory(to: UInt8.self).baseAddress!,
                    all.bindMemory(to: UInt8.self).baseAddress! + 32)
            }
        }
        let derived = KeyCard(agreementKey: agreementPublic, signingKey: signingPublic)
        if let expected, expected != derived {
            throw .keystoreCorrupt("the private keys do not match the key card")
        }
        self.label = label
        self.card = derived
        self.agreementSecret = agreementSecret
        self.signingSecret = signingSecret
    }

    /// Rebuilds an identity from the secret ``generate(label:random:)`` returned.
    public convenience init(label: Label, secret: SecureBytes) throws(VaultError) {
        try self.init(label: label, card: nil, secret: secret)
    }

    /// A fresh identity. Returns it with the secret to store: 64 bytes that
    /// ``init(label:secret:)`` turns back into it (a relay keeps its own so).
    public static func generate(label: Label, random: some RandomSource = SecureRandom()) -> (Identity, SecureBytes) {
        let secret = random.secureBytes(secretLength)
        // Cannot throw: no card to compare against and the length is right.
        return (try! Identity(label: label, card: nil, secret: secret), secret)
    }

    /// The X25519 secret key, as the Noise static key of this machine's connections.
    public var agreementSecretKey: SecureBytes { agreementSecret }

    /// A name for `data` that only this identity can compute (BLAKE2b keyed by its X25519
    /// secret, over `domain` ‖ `data`), the same on every machine that holds it. For names
    /// this side uses of values another side chooses: that side cannot make two of them
    /// collide, having no key to search with.
    public func privateName(_ domain: String, of data: [UInt8], length: Int) -> [UInt8] {
        precondition(length >= 4 && length <= 32)
        let message = Array(domain.utf8) + data
        var name = [UInt8](repeating: 0, count: length)
        agreementSecret.withUnsafeBytes { secret in
            _ = crypto_generichash(&name, length, message, UInt64(message.count), secret.bindMemory(to: UInt8.self).baseAddress!, secret.count)
        }
        return name
    }

    /// An Ed25519 signature over `message`.
    public func sign(_ message: [UInt8]) -> [UInt8] {
        var signature = [UInt8](repeating: 0, count: Int(crypto_sign_BYTES))
        signingSecret.withUnsafeBytes { sk in
            _ = crypto_sign_detached(
                &signature, nil, message, UInt64(message.count),
                sk.bindMemory(to: UInt8.self).baseAddress!)
        }
        return signature
    }
}

extension KeyCard {
    /// Checks an Ed25519 signature made by this card's owner.
    public func verify(signature: [UInt8], of message: [UInt8]) -> Bool {
        Self.verify(signature: signature, of: message, signingKey: signingKey)
    }

    /// Checks an Ed25519 signature by the owner of `signingKey` (32 bytes), where only that
    /// half of a card is known: a relay knows its callers by their signing keys.
    public static func verify(signature: [UInt8], of message: [UInt8], signingKey: [UInt8]) -> Bool {
        Sodium.ready
        guard signature.count == Int(crypto_sign_BYTES), signingKey.count == Int(crypto_sign_PUBLICKEYBYTES) else { return false }
        return crypto_sign_verify_detached(signature, message, UInt64(message.count), signingKey) == 0
    }
}
