/// What a share link's fragment and password derive (Docs/LINKS.md, "Keys").
///
/// The fragment holds F, 32 random bytes, and with a password also S, a 16-byte salt.
/// Browsers never send a fragment, so the relay holds neither: it stores the content
/// under K and the hash of C, and learns C only when someone who holds the link claims.
///
///     IKM = F                                   without a password
///     IKM = F ‖ PBKDF2-HMAC-SHA-256(NFC(password), S, N, 32)   with one
///     K = HKDF-SHA-256(IKM, "vault-link-v1", "content", 32)
///     C = HKDF-SHA-256(IKM, "vault-link-v1", "claim", 32)
///
/// PBKDF2, not scrypt: the page derives the same with WebCrypto, which has no memory-hard
/// function. Its cost N is at least 600,000 (OWASP's figure for PBKDF2-HMAC-SHA-256) and is
/// read from the relay's status answer, so it is bounded: a relay that lies about it only
/// makes the claim fail. The password guards a link that leaked (a chat log, a mail
/// archive); it is the relay's claim limit per link, not the cost alone, that keeps an
/// online guesser slow, and the cost that keeps an offline one (with the link and a copy
/// of the ciphertext) slow.
public struct LinkKeys {
    public static let fragmentKeyLength = 32
    public static let saltLength = 16
    public static let minimumIterations = 600_000
    public static let maximumIterations = 10_000_000
    /// What a new link with a password costs to open.
    public static let defaultIterations = 600_000

    /// K, the content key.
    public let content: SecureBytes
    /// C, the claim secret, sent to the relay to claim a view.
    public let claim: SecureBytes

    /// Derives K and C from a fragment (F, or F ‖ S) and the password it needs.
    public init(fragment: SecureBytes, password: SecureBytes?, iterations: Int) throws(VaultError) {
        let ikm: SecureBytes
        switch (fragment.count, password) {
        case (Self.fragmentKeyLength, nil):
            ikm = fragment
        case (Self.fragmentKeyLength + Self.saltLength, let password?):
            guard (Self.minimumIterations...Self.maximumIterations).contains(iterations) else {
                throw .kdfParametersOutOfRange("a link's password cost is \(Self.minimumIterations) to \(Self.maximumIterations) iterations, not \(iterations)")
            }
            ikm = SecureBytes(count: 2 * Self.fragmentKeyLength)
            fragment.withUnsafeBytes { fragment in
                ikm.withUnsafeMutableBytes { ikm in
                    ikm.copyMemory(from: UnsafeRawBufferPointer(rebasing: fragment[..<Self.fragmentKeyLength]))
                    let salt = Array(fragment[Self.fragmentKeyLength...])
                    password.withUnsafeBytes { password in
                        KeyDerivation.pbkdf2(password: password, salt: salt, iterations: iterations,
                                             into: UnsafeMutableRawBufferPointer(rebasing: ikm[Self.fragmentKeyLength...]))
                    }
                }
            }
        case (Self.fragmentKeyLength, _?):
            throw .invalidSecret("this link has no password")
        case (Self.fragmentKeyLength + Self.saltLength, nil):
            throw .passwordRequired
        default:
            throw .malformed(what: "the link", detail: "its key is incomplete or damaged")
        }
        content = SecureBytes(count: 32)
        claim = SecureBytes(count: 32)
        let salt = Array("vault-link-v1".utf8)
        ikm.withUnsafeBytes { ikm in
            content.withUnsafeMutableBytes { KeyDerivation.hkdf(ikm: ikm, salt: salt, info: Array("content".utf8), into: $0) }
            claim.withUnsafeMutableBytes { KeyDerivation.hkdf(ikm: ikm, salt: salt, info: Array("claim".utf8), into: $0) }
        }
    }

    /// A new fragment: F, and S when the link has a password.
    public static func newFragment(password: Bool) -> SecureBytes {
        SecureBytes.random(count: fragmentKeyLength + (password ? saltLength : 0))
    }
}
