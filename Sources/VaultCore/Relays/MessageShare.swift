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
        guard let position = header.recipientPosition(agreementKey: recipient.card.agreementKey) else {
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
    public private(set) var prefixLength = 0
    /// The whole share's length, by its header.
    public private(set) var length: UInt64 = 0
    /// The recipients' boxes, once they are in.
    private(set) var boxes: [UInt8] = []
    private var prefix: [UInt8] = []
    private var taken: UInt64 = 0
    private var hasher: PieceHasher?
    private let maximumLength: UInt64

    /// The largest share any relay may accept (`vault relay serve --max-message` is at most
    /// this): 1 GiB.
    public static let largest: UInt64 = 1 << 30

    /// Ready for a share of at most `maximumLength` bytes.
    public init(maximumLength: UInt64) { self.maximumLength = maximumLength }

    /// Takes the next bytes. Throws as soon as they cannot be a valid share: a bad prefix
    /// or signature, a share longer than its header says or than `maximumLength`.
    public mutating func take(_ bytes: UnsafeRawBufferPointer) throws(VaultError) {
        var rest = bytes
        while header == nil, rest.count > 0 {
            let want = prefixWanted()
            let part = min(rest.count, want - prefix.count)
            prefix += rest[..<part]
            rest = UnsafeRawBufferPointer(rebasing: rest[part...])
            // A wrong start is refused at once, not after the length it claims.
            if prefix.count == 9 { try checkStart() }
            if prefix.count == want, want > 9 { try parsePrefix() }
        }
        guard header != nil, rest.count > 0 else { return }
        guard taken + UInt64(rest.count) <= length - UInt64(prefixLength) else {
            throw .malformed(what: "the message share", detail: "bytes follow its end")
        }
        let boxesLength = header!.recipients.count * MessageShare.boxLength
        if boxes.count < boxesLength {
            let part = min(rest.count, boxesLength - boxes.count)
            boxes += rest[..<part]
            rest = UnsafeRawBufferPointer(rebasing: rest[part...])
            taken += UInt64(part)
        }
        if rest.count > 0 {
            hasher!.update(rest)
            taken += UInt64(rest.count)
        }
    }

    /// Checks that the whole share came, and that its piece matches the commitment.
    public mutating func finish() throws(VaultError) {
        guard let header, taken == length - UInt64(prefixLength) else { throw .truncated(what: "the message share") }
        guard Sodium.equal(hasher!.finish(), header.commitments[header.index - 1]) else {
            throw .corruptSecret("the message share's piece does not match its sender's commitment")
        }
    }

    /// How many prefix bytes are wanted now: the first 9, then the rest.
    private func prefixWanted() -> Int {
        guard prefix.count >= 9 else { return 9 }
        return 9 + SignedFrame.bodyLength(prefix) + 64
    }

    private func checkStart() throws(VaultError) {
        guard Array(prefix[0..<4]) == MessageShare.magic else {
            throw .malformed(what: "the message share", detail: "not a vault message share")
        }
        guard prefix[4] == MessageShare.version else {
            throw .unsupportedVersion(what: "the message share", version: prefix[4], supported: MessageShare.version)
        }
        guard prefixWanted() - 9 - 64 <= MessageHeader.maximumLength else {
            throw .malformed(what: "the message share", detail: "header too long")
        }
    }

    private mutating func parsePrefix() throws(VaultError) {
        let headerLength = prefixWanted() - 9 - 64
        let encoded = Array(prefix[9..<(9 + headerLength)])
        let parsed = try MessageHeader(parsing: encoded)
        guard parsed.sender.verify(signature: Array(prefix[(9 + headerLength)...]), of: MessageShare.signatureDomain + encoded) else {
            throw .badSignature(what: "the message share")
        }
        let total = UInt64(prefix.count) + UInt64(parsed.recipients.count * MessageShare.boxLength) + parsed.pieceLength
        guard total <= maximumLength else {
            throw .malformed(what: "the message share", detail: "it is \(total) bytes, over the limit of \(maximumLength)")
        }
        header = parsed
        prefixLength = prefix.count
        length = total
        hasher = PieceHasher(threshold: parsed.threshold)
    }
}
