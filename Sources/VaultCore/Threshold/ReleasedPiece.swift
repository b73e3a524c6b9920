import Foundation

/// A holder's piece and key share, released to one other holder of the same secret:
///
///     "VLTP" ‖ version 0x02 ‖ header length (4) ‖ header ‖ signature (64) ‖ nonce (24) ‖ box (80) ‖ piece
///     ‖ piece signature (64)
///     header = secret id (16) ‖ from index (1) ‖ to index (1) ‖ sender card (65)
///              ‖ recipient X25519 key (32) ‖ one-time X25519 key (32) ‖ piece length (8)
///
/// The signature is the sender's Ed25519 over the header. The box is `crypto_box` to the
/// recipient from the one-time key over key share ‖ BLAKE2b(header): it binds
/// the release to this secret and this requester, and, as for bundles (``ShareBundle``),
/// no long-term key of the sender's opens it afterwards. The piece goes as it is (a
/// fragment of authenticated ciphertext, see ``ShareBundle``); it and the key share are
/// checked by the recipient against the dealer's signed header.
///
/// The signatures prove the sender card's Ed25519 half, and nothing else of it: the card's
/// X25519 key is a claim. So the recipient names a sender only by a known card (the
/// dealer's, or a trusted peer's) with the same signing key, and only when that card's
/// X25519 key is the claimed one; a known signer that claims another holder's key is named
/// as the forger, never the holder it claims to be.
///
/// The piece signature covers BLAKE2b(header) and the piece's commitment hash, computed as
/// it was sent: a piece altered on the way is "damaged" and names nobody, while a piece its
/// signer signed and that does not match the dealer's commitment is "forged" by that signer.
public enum ReleasedPiece {
    static let magic: [UInt8] = Array("VLTP".utf8)
    static let version: UInt8 = 2
    static let headerLength = 16 + 1 + 1 + KeyCard.encodedLength + 32 + 32 + 8
    static let signatureDomain = Array("vault/v2/release".utf8)
    static let pieceSignatureDomain = Array("vault/v2/release-piece".utf8)
    /// Everything before the piece.
    static let bodyOffset = 9 + headerLength + 64 + ShareBundle.bodyPrefixLength

    /// The exact length of a released piece of `secret`: a receiver refuses any other before
    /// it stores a byte.
    public static func length(for secret: BundleHeader) -> UInt64 {
        let piece = secret.pieceLength
        return UInt64(bodyOffset) + piece + 64
    }

    /// What the piece signature signs: the release header's hash and the piece's
    /// commitment-keyed BLAKE2b, as sent.
    static func pieceSignatureMessage(_ header: Header, pieceHash: [UInt8]) -> [UInt8] {
        pieceSignatureDomain + header.hash + pieceHash
    }

    struct Header: Equatable {
        let secretID: [UInt8]
        let from: Int
        let to: Int
        let sender: KeyCard
        let recipientKey: [UInt8]
        let oneTimeKey: [UInt8]
        let pieceLength: UInt64

        func encoded() -> [UInt8] {
            var w = ByteWriter()
            w.raw(secretID)
            w.u8(UInt8(from))
            w.u8(UInt8(to))
            w.raw(sender.encoded)
            w.raw(recipientKey)
            w.raw(oneTimeKey)
            w.u64(pieceLength)
            return w.bytes
        }

        var hash: [UInt8] { Sodium.blake2b(key: "vault/v1/release", encoded()) }
    }

    /// Writes this holder's piece of `secret`, with its key share sealed to `recipient`, into
    /// `output`.
    public static func release(
        _ secret: StoredSecret, to recipient: Peer, keystore: Keystore, identity: Identity, output: OutputFile,
        progress: ProgressMeter? = nil, random: some RandomSource = SecureRandom()
    ) throws {
        let header = secret.header
        guard let to = header.index(of: recipient.card.agreementKey), to != header.holderIndex else {
            throw VaultError.notAHolder(label: recipient.label.value)
        }
        try release(secret, toIndex: to, sealedTo: recipient.card.agreementKey, keystore: keystore, identity: identity, output: output,
                    progress: progress, random: random)
    }

    /// Writes this holder's piece of `secret` for requester index `to` (0 for a requester
    /// that holds no share), its key share sealed to the X25519 key `recipientKey`: the
    /// requester's own, or the one-time reply key of a request through relays (Docs/FORMAT.md
    /// §20), which only that request's maker can open.
    static func release(
        _ secret: StoredSecret, toIndex to: Int, sealedTo recipientKey: [UInt8], keystore: Keystore, identity: Identity, output: OutputFile,
        progress: ProgressMeter? = nil, random: some RandomSource = SecureRandom()
    ) throws {
        let header = secret.header
        precondition(to != header.holderIndex && to <= header.count)
        guard KeyCard.isUsableAgreementKey(recipientKey) else {
            throw VaultError.malformed(what: "the piece request", detail: "its reply key is not a usable X25519 key")
        }
        let keyShare = try ShareBundle.openBox(secret.box, header: header, holder: identity)
        let pieceLength = header.pieceLength
        let oneTime = OneTimeKey(random: random)
        let releaseHeader = Header(secretID: header.secretID, from: header.holderIndex, to: to, sender: identity.card,
                                   recipientKey: recipientKey, oneTimeKey: oneTime.publicKey, pieceLength: pieceLength)
        let encoded = releaseHeader.encoded()
        precondition(encoded.count == headerLength)
        let prefix = SignedFrame.make(magic: magic, version: version, body: encoded, domain: signatureDomain, signer: identity)
            + Box.seal([keyShare, SecureBytes(copying: releaseHeader.hash)], to: recipientKey,
                       secretKey: oneTime.secretKey, random: random)
        try prefix.withUnsafeBytes { try output.write($0) }

        // Copy the stored piece, checking it against the commitment.
        let hasher = header.commitmentHasher()
        progress?.expect(pieceLength)
        var copied: UInt64 = 0
        try keystore.withPiece(secret) { source in
            var buffer = [UInt8](repeating: 0, count: SecretStream.chunkLength)
            while true {
                let count = try buffer.withUnsafeMutableBytes { try source.read(into: $0) }
                if count == 0 { break }
                copied += UInt64(count)
                progress?.advance(count)
                try buffer.withUnsafeBytes { chunk in
                    let part = UnsafeRawBufferPointer(rebasing: chunk[0..<count])
                    hasher.update(part)
                    try output.write(part)
                }
            }
        }
        let pieceHash = hasher.finish()
        guard copied == pieceLength, Sodium.equal(pieceHash, header.commitments[header.holderIndex - 1]) else {
            throw VaultError.keystoreCorrupt("the stored piece does not match its commitment")
        }
        try identity.sign(pieceSignatureMessage(releaseHeader, pieceHash: pieceHash)).withUnsafeBytes { try output.write($0) }
    }

    /// The X25519 key of the holder that released the piece in the file at `path`, as its
    /// header claims (unchecked: for knowing whom not to ask again, never for trust).
    public static func claimedSender(ofFile path: String) -> [UInt8]? {
        guard var source = try? FileSource(path: path), let start = try? source.readFully(9 + headerLength),
              start.count == 9 + headerLength, Array(start[0..<4]) == magic else { return nil }
        return (try? KeyCard(encoded: Array(start[(9 + 18)..<(9 + 18 + KeyCard.encodedLength)])))?.agreementKey
    }

    /// A released piece file, parsed and opened: its key share, where its piece starts, and the sender's card once checked against a known one.
    struct Opened {
        let header: Header
        let keyShare: SecureBytes
        let bodyOffset: Int
        /// The dealer's or a trusted peer's card, equal to the one in the header, whose
        /// Ed25519 key signed it; nil when no known card has that signing key.
        let sender: KeyCard?
    }

    /// What reading a release for this holder gave: opened, or addressed here and for this
    /// secret but not to be used. Such a release is one bad piece among others: the caller
    /// sets it aside and goes on, where a release for another secret or another holder is the
    /// user's mistake and stops the command.
    enum Reading {
        case opened(Opened)
        /// `sender` is the verified card to name, if any; `problem` starts "damaged:" or "forged:".
        case setAside(Header, sender: KeyCard?, problem: String)
    }

    /// Who a release is for: a requester index (0: a requester that holds no share) and
    /// the X25519 key pair its box is sealed to.
    struct Recipient {
        let index: Int
        let agreementKey: [UInt8]
        let secretKey: SecureBytes

        /// `identity`, holding share `index` of the secret.
        init(_ identity: Identity, index: Int) {
            self.init(index: index, agreementKey: identity.card.agreementKey, secretKey: identity.agreementSecret)
        }

        init(index: Int, agreementKey: [UInt8], secretKey: SecureBytes) {
            self.index = index
            self.agreementKey = agreementKey
            self.secretKey = secretKey
        }
    }

    /// Opens the release in `path` for `secret`'s holder `identity`, refusing one for
    /// another secret, another requester, or from a key that is not the claimed holder, and
    /// one to set aside with ``VaultError/damaged(what:detail:)``.
    static func open(path: String, secret: BundleHeader, identity: Identity, trusted: [KeyCard] = []) throws -> Opened {
        switch try read(path: path, secret: secret, recipients: [Recipient(identity, index: secret.holderIndex)], trusted: trusted) {
        case .opened(let opened): return opened
        case .setAside(_, _, let problem): throw VaultError.damaged(what: path, detail: problem)
        }
    }

    /// Reads the release in `path` (see ``Reading``) for whichever of `recipients` it names
    /// (by its recipient key and index); `trusted` are the cards the sender's card is checked
    /// against, besides the dealer's.
    static func read(path: String, secret: BundleHeader, recipients: [Recipient], trusted: [KeyCard]) throws -> Reading {
        var source = try FileSource(path: path)
        let start = try source.readFully(9)
        guard start.count == 9, Array(start[0..<4]) == magic else {
            throw VaultError.malformed(what: path, detail: "not a released vault piece")
        }
        guard start[4] == version else { throw VaultError.unsupportedVersion(what: path, version: start[4], supported: version) }
        let length = SignedFrame.bodyLength(start)
        guard length == headerLength else { throw VaultError.malformed(what: path, detail: "wrong header length") }
        let encoded = try source.readFully(length)
        var reader = ByteReader(encoded)
        let header: Header
        do {
            header = Header(secretID: try reader.raw(16), from: Int(try reader.u8()), to: Int(try reader.u8()),
                            sender: try KeyCard(encoded: try reader.raw(KeyCard.encodedLength)),
                            recipientKey: try reader.raw(32), oneTimeKey: try reader.raw(32), pieceLength: try reader.u64())
        } catch is ByteReader.Failure {
            throw VaultError.truncated(what: path)
        } catch {
            throw VaultError.malformed(what: path, detail: "the sender's card is invalid")
        }
        guard header.secretID == secret.secretID else {
            throw VaultError.mixedSecrets(file: path, secretID: header.secretID.hex)
        }
        guard let recipient = recipients.first(where: { Sodium.equal(header.recipientKey, $0.agreementKey) }), header.to == recipient.index else {
            throw VaultError.notForThisIdentity(what: path)
        }
        guard header.from >= 1, header.from <= secret.count, header.from != recipient.index,
              secret.index(of: header.sender.agreementKey) == header.from else {
            throw VaultError.malformed(what: path, detail: "its sender is not holder \(header.from) of this secret")
        }
        guard header.pieceLength == secret.pieceLength else {
            throw VaultError.malformed(what: path, detail: "wrong piece length")
        }
        let signature = try source.readFully(64)
        let box = try source.readFully(ShareBundle.bodyPrefixLength)
        guard signature.count == 64, box.count == ShareBundle.bodyPrefixLength else { throw VaultError.truncated(what: path) }
        // Nothing is proven until both hold, so no sender is named before.
        guard header.sender.verify(signature: signature, of: signatureDomain + encoded) else {
            return .setAside(header, sender: nil, problem: "damaged: its sender's signature does not verify")
        }
        guard let plain = Box.open(box, from: header.oneTimeKey, secretKey: recipient.secretKey), plain.count == ShareBundle.boxPlaintextLength,
              Sodium.equal(plain.slice(32..<64).withUnsafeBytes(Array.init), header.hash) else {
            return .setAside(header, sender: nil, problem: "damaged: its sealed keys do not open")
        }
        // The signature proved the Ed25519 half only. Known cards: the dealer's (signed in the
        // bundle header) and the trusted peers'.
        let known = [secret.dealer] + trusted
        let signer = known.first { Sodium.equal($0.signingKey, header.sender.signingKey) }
        if let signer {
            guard signer == header.sender else {
                // A known signer claiming another holder's key: it is the one to name.
                return .setAside(header, sender: signer,
                                 problem: "forged: its signer claims holder \(header.from)'s key, which is not its own")
            }
            return .opened(Opened(header: header, keyShare: plain.slice(0..<32), bodyOffset: bodyOffset, sender: signer))
        }
        if known.contains(where: { Sodium.equal($0.agreementKey, header.sender.agreementKey) }) {
            // An unknown key signing as a known holder: nobody proven to name.
            return .setAside(header, sender: nil,
                             problem: "forged: it is signed by a key not known for holder \(header.from)")
        }
        return .opened(Opened(header: header, keyShare: plain.slice(0..<32), bodyOffset: bodyOffset, sender: nil))
    }
}
