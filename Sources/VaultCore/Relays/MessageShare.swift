import CSodium
import Foundation

/// One relay's share of a message, as it is stored and sent (Docs/FORMAT.md §17):
///
///     "VLTM" ‖ version 0x01 ‖ header length (4) ‖ header ‖ signature (64)   — the prefix
///     ‖ per recipient: nonce (24) ‖ box (80)                                  — the boxes
///     ‖ piece
///
/// Each box is `crypto_box` from the header's one-time key to one recipient, over this
/// share's Shamir share of the data key (32) ‖ BLAKE2b(header) (32), as a share bundle's
/// box is (``ShareBundle`` says why the key is one-time and why the piece is not sealed
/// again). A relay sees the header and can check the signature and the piece's commitment,
/// but opens no box: fewer than k relays, or all of them without a recipient's key, learn
/// nothing of the content.
enum MessageShare {
    static let magic: [UInt8] = Array("VLTM".utf8)
    static let version: UInt8 = 1
    static let signatureDomain = Array("vault/v1/message-share".utf8)
    static let boxLength = Int(crypto_box_NONCEBYTES) + 64 + Int(crypto_box_MACBYTES)

    /// The prefix: magic, version, length, header and the sender's signature.
    static func prefix(header: MessageHeader, signer: Identity) -> [UInt8] {
        SignedFrame.make(magic: magic, version: version, body: header.encoded(), domain: signatureDomain, signer: signer)
    }

    static func headerHash(_ header: MessageHeader) -> [UInt8] {
        Sodium.blake2b(key: "vault/v1/message", header.encoded())
    }

    /// The box for recipient `position`, sealed with `oneTime` (public half `header.senderKey`).
    static func sealBox(keyShare: SecureBytes, header: MessageHeader, position: Int, oneTime: OneTimeKey,
                        random: some RandomSource) -> [UInt8] {
        precondition(oneTime.publicKey == header.senderKey)
        return Box.seal([keyShare, SecureBytes(copying: headerHash(header))], to: header.recipients[position].card.agreementKey,
                        secretKey: oneTime.secretKey, random: random)
    }

    /// Opens this recipient's box: the key share, once the header hash inside matches.
    static func openBox(boxes: [UInt8], header: MessageHeader, recipient: Identity) throws(VaultError) -> SecureBytes {
        guard let position = header.recipientPosition(card: recipient.card) else {
            throw .notForThisIdentity(what: "the message")
        }
        let box = Array(boxes[(position * boxLength)..<((position + 1) * boxLength)])
        guard let plain = Box.open(box, from: header.senderKey, to: recipient), plain.count == 64 else {
            throw .damaged(what: "the message share", detail: "its sealed key does not open")
        }
        let bound = plain.slice(32..<64).withUnsafeBytes(Array.init)
        guard Sodium.equal(bound, headerHash(header)) else {
            throw .malformed(what: "the message share", detail: "its sealed key belongs to another header")
        }
        return plain.slice(0..<32)
    }
}

/// A message share read as it arrives (an upload at a relay, a download at a recipient):
/// the signed header is checked as soon as it is in, so a share's length is known before
/// any of its body is stored, and the piece is hashed on the way, so a share whose piece
/// does not match the sender's commitment is refused at its end.
public struct IncomingMessageShare {
    /// The verified header, once the prefix is in.
    public private(set) var header: MessageHeader?
    /// Bytes of the prefix (magic to signature), once the header is in.
    public var prefixLength: Int { reader.prefixLength }
    /// The whole share's length, by its header.
    public var length: UInt64 { reader.length }
    /// The recipients' boxes, once they are in.
    var boxes: [UInt8] { reader.boxes }
    private var reader: BoxedFrameReader
    private var hasher: PieceHasher?

    /// The largest share any relay may accept (`vault relay serve --max-message` is at most
    /// this): 1 GiB.
    public static let largest: UInt64 = 1 << 30

    /// Ready for a share of at most `maximumLength` bytes.
    public init(maximumLength: UInt64) {
        reader = BoxedFrameReader(magic: MessageShare.magic, version: MessageShare.version, what: "the message share",
                                  maximumHeaderLength: MessageHeader.maximumLength, maximumLength: maximumLength)
    }

    /// Takes the next bytes. Throws as soon as they cannot be a valid share: a bad prefix
    /// or signature, a share longer than its header says or than `maximumLength`.
    public mutating func take(_ bytes: UnsafeRawBufferPointer) throws(VaultError) {
        var parsed: MessageHeader?, hasher = self.hasher
        try reader.take(bytes, header: { encoded, signature throws(VaultError) in
            let header = try MessageHeader(parsing: encoded)
            guard header.sender.verify(signature: signature, of: MessageShare.signatureDomain + encoded) else {
                throw .badSignature(what: "the message share")
            }
            parsed = header
            hasher = PieceHasher(threshold: header.threshold)
            return .init(boxes: header.recipients.count, rest: header.pieceLength)
        }, rest: { hasher!.update($0) })
        if let parsed { header = parsed }
        self.hasher = hasher
    }

    /// Checks that the whole share came, and that its piece matches the commitment.
    public mutating func finish() throws(VaultError) {
        guard let header, reader.isComplete else { throw .truncated(what: "the message share") }
        guard Sodium.equal(hasher!.finish(), header.commitments[header.index - 1]) else {
            throw .corruptSecret("the message share's piece does not match its sender's commitment")
        }
    }
}
