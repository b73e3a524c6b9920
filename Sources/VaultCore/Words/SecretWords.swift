import CSodium

/// A vault secret as SLIP-39 words, one holder's share a mnemonic (Docs/FORMAT.md, "SLIP-39
/// words"):
///
/// - the master secret is the secret's content itself, so that any SLIP-39 tool recovers
///   exactly what vault stored: a key (32 bytes), or a note of 16 to 32 bytes, an even
///   number (the standard's unit is 16 bits, and vault pads nothing);
/// - one level by default: one group, the secret's k of n, holder i the member i - 1;
/// - with a split (T of M), two levels: k of n groups, holder i the group i - 1, each
///   group T of M mnemonics that the holder keeps in different places;
/// - extendable (the encryption does not depend on the identifier), iteration exponent 1.
///
/// The set is a function of the secret: its identifier, digest and random shares come from
/// a stream keyed by the secret itself, the secret's id, the layout and the passphrase.
/// Holders export their words at different times, from different machines, and their
/// words must still be of one set; a sheet printed again must carry the same words as the
/// one it replaces. To whoever lacks the secret the stream is as unpredictable as fresh
/// randomness (it is ChaCha20 under a key that is a BLAKE2b MAC with the secret as key),
/// so the shares hide the secret as SLIP-39's own do, to a 128-bit bound at least.
/// Nowhere else does vault derive what it could draw (Docs/DECISIONS.md, "SLIP-39 words").
public enum SecretWords {
    /// The largest secret dealt as words (33 words a mnemonic).
    public static let maximumLength = 32
    /// The smallest: the standard's 128 bits (20 words).
    public static let minimumLength = 16

    /// The warning for words of `header`'s secret, or nil for a key. The words are a
    /// function of the secret (above), so whoever holds one mnemonic, or finds one kit, can
    /// test a guess of the secret against it offline: fewer than k shares hide a key (drawn
    /// at random, 256 bits), but a note only as well as it is hard to guess. Said, not
    /// refused: a seed or a random token is as safe as a key, and only the dealer knows which
    /// a note is.
    public static func guessingWarning(_ header: BundleHeader) -> String? {
        guard header.type == .note else { return nil }
        return "these words are only as hard to guess as the note itself: one mnemonic lets its holder test guesses of it offline"
    }

    /// The hint beside ``guessingWarning(_:)``.
    public static let guessingHint = "give the words a SLIP-39 passphrase kept apart from them, or keep words for random notes (seeds, tokens)"

    /// Refuses a secret whose type the words cannot carry: a file, a password or a contact
    /// has fields (a name, a username, a URL, phones) that a mnemonic has no room for, and a
    /// SLIP-39 tool would hand back bare bytes without them.
    public static func checkType(_ header: BundleHeader) throws(VaultError) {
        guard header.type == .key || header.type == .note else {
            throw .wordsDoNotFit("secret \(header.secretIDHex.prefix(16)) is a \(header.type); SLIP-39 words carry keys and notes of \(minimumLength) to \(maximumLength) bytes")
        }
        _ = try scheme(for: header, split: nil)
    }

    /// Refuses content the words cannot carry, naming the limit.
    public static func checkContent(length: Int) throws(VaultError) {
        guard length >= minimumLength, length <= maximumLength, length % 2 == 0 else {
            throw .wordsDoNotFit("SLIP-39 words carry \(minimumLength) to \(maximumLength) bytes, an even number, and this secret has \(length)"
                + (length > maximumLength ? " (its 33 words a share are as long as a share on paper may be)" : ""))
        }
    }

    /// The layout for `header`'s holders: one level, or with `split`, a group a holder.
    public static func scheme(for header: BundleHeader, split: SLIP39Scheme.Group?) throws(VaultError) -> SLIP39Scheme {
        guard header.count <= 16 else {
            throw .wordsDoNotFit("SLIP-39 has at most 16 shares in a group and 16 groups, and secret \(header.secretIDHex.prefix(16)) has \(header.count) holders")
        }
        let scheme = split.map { group in
            SLIP39Scheme(groupThreshold: header.threshold, groups: Array(repeating: group, count: header.count))
        } ?? .single(threshold: header.threshold, count: header.count)
        try scheme.validate()
        return scheme
    }

    /// Every holder's mnemonics (holder index i at i - 1): one each, or a group's M with a
    /// split.
    public static func deal(
        _ secret: SecureBytes, header: BundleHeader, passphrase: SecureBytes, split: SLIP39Scheme.Group?
    ) throws(VaultError) -> [[Mnemonic]] {
        try checkType(header)
        try checkContent(length: secret.count)
        let scheme = try scheme(for: header, split: split)
        let stream = SecretKeyedStream(secret: secret, context: context(header: header, scheme: scheme, passphrase: passphrase))
        let groups = try SLIP39.split(secret, passphrase: passphrase, scheme: scheme, extendable: true, exponent: SLIP39.defaultExponent,
                                      random: stream)
        return split == nil ? groups[0].map { [$0] } : groups
    }

    /// What the stream is bound to besides the secret: the secret's id, the layout, the
    /// exponent and the passphrase (hashed), so another layout or passphrase is another set.
    static func context(header: BundleHeader, scheme: SLIP39Scheme, passphrase: SecureBytes) -> [UInt8] {
        var writer = ByteWriter()
        writer.raw(Array("vault/v1/slip39-words".utf8))
        writer.raw(header.secretID)
        writer.u8(UInt8(SLIP39.defaultExponent))
        writer.u8(UInt8(scheme.groupThreshold))
        writer.u8(UInt8(scheme.groups.count))
        for group in scheme.groups {
            writer.u8(UInt8(group.threshold))
            writer.u8(UInt8(group.count))
        }
        let hasher = Sodium.Blake2b(key: "vault/v1/slip39-passphrase")
        passphrase.withUnsafeBytes { hasher.update($0) }
        writer.raw(hasher.finish())
        return writer.bytes
    }
}

/// The bytes a vault secret's SLIP-39 set is made of (``SecretWords`` says why they are
/// derived): the n-th request is `randombytes_buf_deterministic` (ChaCha20) under
/// BLAKE2b-256(key = K, n), where K = BLAKE2b-256(key = secret, context).
final class SecretKeyedStream: RandomSource, @unchecked Sendable {
    private let key = SecureBytes(count: 32)
    /// Requests so far; one dealing runs on one thread.
    private var counter: UInt64 = 0

    init(secret: SecureBytes, context: [UInt8]) {
        Sodium.ready
        precondition(secret.count >= Int(crypto_generichash_KEYBYTES_MIN) && secret.count <= Int(crypto_generichash_KEYBYTES_MAX))
        key.withUnsafeMutableBytes { out in
            secret.withUnsafeBytes { secret in
                _ = crypto_generichash(out.bindMemory(to: UInt8.self).baseAddress!, 32, context, UInt64(context.count),
                                       secret.bindMemory(to: UInt8.self).baseAddress!, secret.count)
            }
        }
    }

    func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        let seed = SecureBytes(count: Int(randombytes_SEEDBYTES))
        var number = counter.bigEndian
        counter += 1
        seed.withUnsafeMutableBytes { seed in
            key.withUnsafeBytes { key in
                withUnsafeBytes(of: &number) { number in
                    _ = crypto_generichash(seed.bindMemory(to: UInt8.self).baseAddress!, seed.count,
                                           number.bindMemory(to: UInt8.self).baseAddress!, UInt64(number.count),
                                           key.bindMemory(to: UInt8.self).baseAddress!, key.count)
                }
            }
            randombytes_buf_deterministic(base, buffer.count, seed.bindMemory(to: UInt8.self).baseAddress!)
        }
    }
}
