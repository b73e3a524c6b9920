import CSodium
import Foundation

/// The signed, public header of a share bundle: what every holder of one secret agrees on,
/// plus which index this bundle is for. Docs/FORMAT.md §6 gives the bytes.
public struct BundleHeader: Equatable, Sendable {
    /// The secret's random id.
    public let secretID: [UInt8]
    /// Unix seconds when the dealer shared it.
    public let createdAt: UInt64
    /// The kind of secret.
    public let type: SecretType
    /// Public text, never encrypted.
    public let description: String
    /// k: pieces needed.
    public let threshold: Int
    /// n: holders.
    public let count: Int
    /// This bundle's holder index, 1 … n.
    public let holderIndex: Int
    /// Bytes of the dispersed ciphertext.
    public let ciphertextLength: UInt64
    /// The dealer's card; the header is signed with its Ed25519 key.
    public let dealer: KeyCard
    /// The X25519 key this bundle is sealed to.
    public let holderKey: [UInt8]
    /// The one-time X25519 public key the dealer sealed this bundle's box with (its secret
    /// half was erased once the box was made): see ``ShareBundle``.
    public let senderKey: [UInt8]
    /// Whether a password layer sits inside.
    public let passwordProtected: Bool
    /// The secret this one replaces (resharing), if any.
    public let replaces: [UInt8]?
    /// For a secret of type `key`: the key's id, which items name. It stays the same when
    /// the key is reshared with the same value, so items still find it.
    public let keyID: [UInt8]?
    /// Every holder's label, by index, when the dealer chose to publish them.
    public let labels: [Label]?
    /// Per index: BLAKE2b commitment to the piece.
    public let commitments: [[UInt8]]
    /// Per index: the proof-of-possession public key.
    public let possessionKeys: [[UInt8]]
    /// Per index: BLAKE2b(secret id ‖ holder's X25519 key), to recognise a holder by its key.
    public let holderTags: [[UInt8]]

    static let maximumDescription = 1024
    /// The largest header the fields allow (FORMAT.md §9): 255 holders with 255-byte labels,
    /// the longest description, a key id and a replaced id. 90986 bytes; the cap is one a
    /// header can reach, so a longer length is refused before it is read.
    package static let maximumLength = 16 + 8 + 1 + (2 + maximumDescription) + 3 + 8 + KeyCard.encodedLength + 32 + 32 + 1 + (1 + 16) + 16
        + (1 + 255 * (1 + Label.maximumBytes)) + 255 * 96

    /// The id as 32 hex digits.
    public var secretIDHex: String { secretID.hex }

    /// The index whose holder tag matches `agreementKey`, if any.
    public func index(of agreementKey: [UInt8]) -> Int? {
        let tag = Self.holderTag(secretID: secretID, agreementKey: agreementKey)
        return holderTags.firstIndex { Sodium.equal($0, tag) }.map { $0 + 1 }
    }

    /// The length of each piece (FORMAT §8): every holder's is the same.
    var pieceLength: UInt64 { Dispersal.pieceLength(dataLength: ciphertextLength, k: threshold) }

    static func holderTag(secretID: [UInt8], agreementKey: [UInt8]) -> [UInt8] {
        Sodium.blake2b(key: "vault/v1/holder", secretID, agreementKey)
    }

    /// The commitment to a piece of this secret (FORMAT §9).
    func commitmentHasher() -> PieceHasher { PieceHasher(threshold: threshold) }

    /// The proof-of-possession key pair of index j, from what only holder j (or a holder of
    /// k pieces) knows: its key share and its piece's commitment.
    package static func possessionKeyPair(secretID: [UInt8], index: Int, keyShare: SecureBytes, commitment: [UInt8])
        -> (publicKey: [UInt8], secretKey: SecureBytes) {
        let seed = keyShare.withUnsafeBytes { share in
            SecureBytes(copying: Sodium.blake2b(key: "vault/v1/pop", secretID, [UInt8(index)], Array(share), commitment))
        }
        var publicKey = [UInt8](repeating: 0, count: 32)
        let secretKey = SecureBytes(count: Int(crypto_sign_SECRETKEYBYTES))
        seed.withUnsafeBytes { s in
            secretKey.withUnsafeMutableBytes { sk in
                _ = crypto_sign_seed_keypair(&publicKey, sk.bindMemory(to: UInt8.self).baseAddress!,
                                             s.bindMemory(to: UInt8.self).baseAddress!)
            }
        }
        return (publicKey, secretKey)
    }

    /// Whether `keyShare` is index `index`'s: it gives that index's proof-of-possession key
    /// with the index's commitment.
    func keyShareMatches(index: Int, keyShare: SecureBytes) -> Bool {
        Self.possessionKeyPair(secretID: secretID, index: index, keyShare: keyShare, commitment: commitments[index - 1]).publicKey
            == possessionKeys[index - 1]
    }

    func encoded() -> [UInt8] {
        var w = ByteWriter()
        w.raw(secretID)
        w.u64(createdAt)
        w.u8(type.rawValue)
        w.string16(description)
        w.u8(UInt8(threshold))
        w.u8(UInt8(count))
        w.u8(UInt8(holderIndex))
        w.u64(ciphertextLength)
        w.raw(dealer.encoded)
        w.raw(holderKey)
        w.raw(senderKey)
        w.u8(passwordProtected ? 1 : 0)
        if let replaces { w.u8(1); w.raw(replaces) } else { w.u8(0) }
        if type == .key { w.raw(keyID!) }
        if let labels { w.u8(1); labels.forEach { w.string8($0.value) } } else { w.u8(0) }
        for j in 0..<count {
            w.raw(commitments[j])
            w.raw(possessionKeys[j])
            w.raw(holderTags[j])
        }
        return w.bytes
    }

    init(secretID: [UInt8], createdAt: UInt64, type: SecretType, description: String, threshold: Int, count: Int,
         holderIndex: Int, ciphertextLength: UInt64, dealer: KeyCard, holderKey: [UInt8], senderKey: [UInt8], passwordProtected: Bool,
         replaces: [UInt8]?, keyID: [UInt8]?, labels: [Label]?, commitments: [[UInt8]], possessionKeys: [[UInt8]],
         holderTags: [[UInt8]]) {
        precondition((type == .key) == (keyID?.count == 16))
        self.secretID = secretID
        self.createdAt = createdAt
        self.type = type
        self.description = description
        self.threshold = threshold
        self.count = count
        self.holderIndex = holderIndex
        self.ciphertextLength = ciphertextLength
        self.dealer = dealer
        self.holderKey = holderKey
        self.senderKey = senderKey
        self.passwordProtected = passwordProtected
        self.replaces = replaces
        self.keyID = keyID
        self.labels = labels
        self.commitments = commitments
        self.possessionKeys = possessionKeys
        self.holderTags = holderTags
    }

    init(parsing bytes: [UInt8]) throws(VaultError) {
        func fail(_ detail: String) -> VaultError { .malformed(what: "the share bundle", detail: detail) }
        var r = ByteReader(bytes)
        do {
            secretID = try r.raw(16)
            createdAt = try r.u64()
            guard let type = SecretType(rawValue: try r.u8()) else { throw fail("unknown secret type") }
            self.type = type
            description = try r.string16("description")
            guard description.utf8.count <= Self.maximumDescription else { throw fail("description too long") }
            threshold = Int(try r.u8())
            count = Int(try r.u8())
            holderIndex = Int(try r.u8())
            guard threshold >= 2, threshold <= count, holderIndex >= 1, holderIndex <= count else {
                throw fail("threshold \(threshold), count \(count), index \(holderIndex) out of range")
            }
            ciphertextLength = try r.u64()
            guard ciphertextLength <= Limits.maximumCiphertext,
                  PayloadStream.plaintextLength(sealed: ciphertextLength) != nil else {
                throw fail("impossible ciphertext length")
            }
            dealer = try KeyCard(encoded: try r.raw(KeyCard.encodedLength))
            holderKey = try r.raw(32)
            senderKey = try r.raw(32)
            switch try r.u8() {
            case 0: passwordProtected = false
            case 1: passwordProtected = true
            default: throw fail("bad password flag")
            }
            switch try r.u8() {
            case 0: replaces = nil
            case 1: replaces = try r.raw(16)
            default: throw fail("bad replaces flag")
            }
            keyID = type == .key ? try r.raw(16) : nil
            switch try r.u8() {
            case 0: labels = nil
            case 1: labels = try (0..<count).map { _ in try Label(signed: &r) }
            default: throw fail("bad labels flag")
            }
            var commitments: [[UInt8]] = [], keys: [[UInt8]] = [], tags: [[UInt8]] = []
            for _ in 0..<count {
                commitments.append(try r.raw(32))
                keys.append(try r.raw(32))
                tags.append(try r.raw(32))
            }
            self.commitments = commitments
            possessionKeys = keys
            holderTags = tags
            try r.end()
        } catch let error as VaultError {
            if case .invalidCard = error { throw fail("the dealer's card is invalid") }
            if case .invalidLabel = error { throw fail("a holder label is invalid") }
            throw error
        } catch ByteReader.Failure.truncated {
            throw fail("the header is truncated")
        } catch ByteReader.Failure.trailingBytes {
            throw fail("bytes follow the header")
        } catch {
            throw fail(VaultError.words(for: error))
        }
        // The box carries BLAKE2b(header) as re-encoded here: the received bytes must be the
        // one encoding of what was parsed, or a header that verifies would open nothing.
        guard encoded() == bytes else { throw fail("the header is not canonically encoded") }
    }

}

/// A share bundle's layout, as a file or a keystore row:
///
///     "VLTB" ‖ version 0x02 ‖ header length (4) ‖ header ‖ signature (64)   — the prefix
///     ‖ nonce (24) ‖ box (80) ‖ piece                                         — the body
///
/// The box is `crypto_box` to the holder over key share (32) ‖ BLAKE2b(header) (32): the
/// last part binds the box to this header, so a body cannot be moved under another
/// bundle's header. The piece is stored as the dispersal made it: it is a fragment of
/// ciphertext that is already authenticated-encrypted under the data key, and the signed
/// commitment binds it, so sealing it again would protect nothing and cost a cipher pass
/// over n/k of the payload.
///
/// The box is sealed with a one-time X25519 key whose public half is in the signed header
/// (``BundleHeader/senderKey``), as age does, not with the dealer's long-term key. With
/// `crypto_box` the two ends share one key, so a box from the dealer's long-term key
/// could be opened with the dealer's secret key as well as the holder's: a thief of the
/// dealer's keystore would read every bundle it ever dealt (the outbox, `--out-dir`
/// files, captured traffic) without any holder. The one-time secret is erased once the box
/// is made. The dealer's signature over the header (and so over the one-time key) is what
/// says who dealt the bundle.
package enum ShareBundle {
    static let magic: [UInt8] = Array("VLTB".utf8)
    static let version: UInt8 = 2
    static let signatureDomain = Array("vault/v2/bundle-header".utf8)
    static let boxPlaintextLength = 64
    static let boxLength = boxPlaintextLength + Int(crypto_box_MACBYTES)
    static let bodyPrefixLength = Int(crypto_box_NONCEBYTES) + boxLength

    /// The prefix: magic, version, length, header and the dealer's signature.
    static func prefix(header: BundleHeader, signer: Identity) -> [UInt8] {
        SignedFrame.make(magic: magic, version: version, body: header.encoded(), domain: signatureDomain, signer: signer)
    }

    /// Reads a prefix: the header, once its signature verifies under the dealer's card in it.
    /// Returns the header and the prefix's length.
    package static func parsePrefix(_ read: (Int) throws -> [UInt8]) throws -> (BundleHeader, [UInt8]) {
        let start = try read(9)
        guard start.count == 9, Array(start[0..<4]) == magic else {
            throw VaultError.malformed(what: "the share bundle", detail: "not a vault share bundle")
        }
        guard start[4] == version else { throw VaultError.unsupportedVersion(what: "the share bundle", version: start[4], supported: version) }
        let length = SignedFrame.bodyLength(start)
        guard length <= BundleHeader.maximumLength else {
            throw VaultError.malformed(what: "the share bundle", detail: "header too long")
        }
        let encoded = try read(length)
        let signature = try read(64)
        guard encoded.count == length, signature.count == 64 else { throw VaultError.truncated(what: "the share bundle") }
        let header = try BundleHeader(parsing: encoded)
        guard header.dealer.verify(signature: signature, of: signatureDomain + encoded) else {
            throw VaultError.badSignature(what: "the share bundle")
        }
        return (header, start + encoded + signature)
    }

    /// The whole bundle's length for a header.
    static func length(prefixLength: Int, header: BundleHeader) -> UInt64 {
        UInt64(prefixLength + bodyPrefixLength) + header.pieceLength
    }

    static func headerHash(_ header: BundleHeader) -> [UInt8] {
        Sodium.blake2b(key: "vault/v1/bundle", header.encoded())
    }

    /// The box for holder `header.holderIndex`, sealed with `oneTime`, the key pair whose
    /// public half is `header.senderKey`.
    static func sealBox(keyShare: SecureBytes, header: BundleHeader, oneTime: OneTimeKey,
                        random: some RandomSource) -> [UInt8] {
        precondition(oneTime.publicKey == header.senderKey)
        return Box.seal([keyShare, SecureBytes(copying: headerHash(header))], to: header.holderKey,
                        secretKey: oneTime.secretKey, random: random)
    }

    /// Opens the box: the key share, once the header hash inside matches.
    package static func openBox(_ body: [UInt8], header: BundleHeader, holder: Identity) throws(VaultError) -> SecureBytes {
        // The header names the holder key in the clear: only a box addressed elsewhere is
        // "another identity"; one addressed here that fails its MAC was altered.
        guard Sodium.equal(header.holderKey, holder.card.agreementKey) else {
            throw .notForThisIdentity(what: "the share bundle")
        }
        guard let plain = Box.open(body, from: header.senderKey, to: holder), plain.count == boxPlaintextLength else {
            throw .damaged(what: "the share bundle", detail: "its sealed keys do not open")
        }
        let bound = plain.slice(32..<64).withUnsafeBytes(Array.init)
        guard Sodium.equal(bound, headerHash(header)) else {
            throw .malformed(what: "the share bundle", detail: "its sealed keys belong to another header")
        }
        return plain.slice(0..<32)
    }
}

/// `crypto_box` (X25519, XSalsa20-Poly1305) over parts in locked memory: nonce (24) ‖ box.
enum Box {
    /// Sealed with `secretKey`: vault's callers pass a ``OneTimeKey``'s, never an identity's.
    static func seal(_ parts: [SecureBytes], to recipient: [UInt8], secretKey: SecureBytes, random: some RandomSource) -> [UInt8] {
        let length = parts.reduce(0) { $0 + $1.count }
        let plain = SecureBytes(count: length)
        var offset = 0
        plain.withUnsafeMutableBytes { out in
            for part in parts {
                part.withUnsafeBytes { (out.baseAddress! + offset).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                offset += part.count
            }
        }
        let nonce = random.bytes(Int(crypto_box_NONCEBYTES))
        var box = [UInt8](repeating: 0, count: length + Int(crypto_box_MACBYTES))
        plain.withUnsafeBytes { m in
            secretKey.withUnsafeBytes { sk in
                let status = crypto_box_easy(&box, m.bindMemory(to: UInt8.self).baseAddress!, UInt64(length), nonce, recipient,
                                             sk.bindMemory(to: UInt8.self).baseAddress!)
                // It fails only for a recipient key of low order, which no parsed card has:
                // a box of zeros must never go out as if sealed.
                precondition(status == 0, "crypto_box_easy failed")
            }
        }
        return nonce + box
    }

    static func open(_ sealed: [UInt8], from sender: [UInt8], to recipient: Identity) -> SecureBytes? {
        open(sealed, from: sender, secretKey: recipient.agreementSecret)
    }

    /// Opened with the X25519 secret key `secretKey` (an identity's, or a one-time reply key's).
    static func open(_ sealed: [UInt8], from sender: [UInt8], secretKey: SecureBytes) -> SecureBytes? {
        let nonceLength = Int(crypto_box_NONCEBYTES), mac = Int(crypto_box_MACBYTES)
        guard sealed.count >= nonceLength + mac else { return nil }
        let nonce = Array(sealed[0..<nonceLength]), box = Array(sealed[nonceLength...])
        let plain = SecureBytes(count: box.count - mac)
        let status = plain.withUnsafeMutableBytes { out in
            secretKey.withUnsafeBytes { sk in
                crypto_box_open_easy(out.bindMemory(to: UInt8.self).baseAddress!, box, UInt64(box.count), nonce, sender,
                                     sk.bindMemory(to: UInt8.self).baseAddress!)
            }
        }
        return status == 0 ? plain : nil
    }
}

/// A share bundle's prefix, parsed as the bundle arrives over the network: the receiver
/// learns the dealer and the bundle's exact length from the signed header before it stores
/// any of the body, so an announced length cannot make it fill the disk.
public struct IncomingBundle {
    private var bytes: [UInt8] = []

    /// Ready to take the bundle's first bytes.
    public init() {}

    /// Takes the next bytes of the bundle. Returns nil while the prefix is incomplete, then
    /// the header, the bundle's whole length by that header, and every byte taken so far.
    /// At most one prefix (at most 9 + 90986 + 64 bytes) is held in memory.
    public mutating func take(_ chunk: UnsafeRawBufferPointer) throws(VaultError) -> (header: BundleHeader, length: UInt64, bytes: [UInt8])? {
        bytes += chunk
        guard bytes.count >= 9 else { return nil }
        let headerLength = SignedFrame.bodyLength(bytes)
        let wrongStart = Array(bytes[0..<4]) != ShareBundle.magic || bytes[4] != ShareBundle.version
            || headerLength > BundleHeader.maximumLength
        // A bad start is refused at once (parsePrefix says why), not after more bytes.
        guard wrongStart || bytes.count >= 9 + headerLength + 64 else { return nil }
        var offset = 0
        let (header, prefix): (BundleHeader, [UInt8])
        do {
            (header, prefix) = try ShareBundle.parsePrefix { count in
                let end = min(offset + count, bytes.count)
                defer { offset = end }
                return Array(bytes[offset..<end])
            }
        } catch let error as VaultError {
            throw error
        } catch {
            throw .malformed(what: "the share bundle", detail: VaultError.words(for: error))
        }
        return (header, ShareBundle.length(prefixLength: prefix.count, header: header), bytes)
    }
}

extension BundleHeader {
    /// The header of the bundle file at `path`, once its signature verifies.
    public init(bundleAt path: String) throws {
        var source = try FileSource(path: path)
        (self, _) = try ShareBundle.parsePrefix { try source.readFully($0) }
    }
}
