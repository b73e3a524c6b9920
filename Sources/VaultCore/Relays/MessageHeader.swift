import Foundation

/// Who a message is for, and its place in the sender's numbering for that recipient.
public struct MessageRecipient: Equatable, Sendable {
    /// The recipient's keys: its share of the data key is sealed to the X25519 key, and the
    /// relays serve the message to whoever signs with the Ed25519 key.
    public let card: KeyCard
    /// 1, 2, 3 … for each message from this sender to this recipient in this group, so a
    /// recipient sees a gap as a gap; 0 for a message outside the numbering (a resend
    /// request, or closed numbers).
    public let sequence: UInt64

    /// A recipient entry.
    public init(card: KeyCard, sequence: UInt64) {
        self.card = card
        self.sequence = sequence
    }
}

/// The signed header of one relay's share of a message (Docs/FORMAT.md §17): what every
/// share of the message agrees on, plus which share this is.
public struct MessageHeader: Equatable, Sendable {
    /// What a message carries.
    public enum Kind: UInt8, Sendable {
        /// A secret (note, file, password, contact, key) from one member to others.
        case content = 1
        /// A list of sequence numbers the sender is missing from the recipient.
        case resendRequest = 2
        /// A list of sequence numbers the sender will not send the recipient: numbers of a
        /// send that failed, or of messages it no longer keeps. The recipient stops
        /// reporting them as gaps.
        case closedNumbers = 3

        /// Whether it is a notice between two members about their numbering (a resend
        /// request, or closed numbers): to one recipient, numbered 0, of type note.
        public var isNumberingNotice: Bool { self != .content }
    }

    /// 128 random bits.
    public let messageID: [UInt8]
    /// The group it was sent in.
    public let groupID: [UInt8]
    /// The sender's card; the header is signed with its Ed25519 key.
    public let sender: KeyCard
    /// What it carries.
    public let kind: Kind
    /// The kind of secret, for `content`.
    public let type: SecretType
    /// Unix seconds when it was sent.
    public let createdAt: UInt64
    /// Unix seconds after which relays must no longer serve it.
    public let expiresAt: UInt64
    /// Whether relays delete it once every recipient confirmed it.
    public let deleteWhenConfirmed: Bool
    /// k: shares needed.
    public let threshold: Int
    /// n: shares, one a relay.
    public let count: Int
    /// This share's index, 1 … n.
    public let index: Int
    /// Bytes of the dispersed ciphertext.
    public let ciphertextLength: UInt64
    /// The one-time X25519 key this share's boxes were sealed with (``ShareBundle`` says why).
    public let senderKey: [UInt8]
    /// The recipients, in the order of their boxes.
    public let recipients: [MessageRecipient]
    /// Per index: the commitment to that share's piece (FORMAT §9).
    public let commitments: [[UInt8]]

    /// The id as 32 hex digits.
    public var messageIDHex: String { messageID.hex }

    /// The position of the recipient with this card (both keys), if any. A recipient entry
    /// with this identity's X25519 key under another Ed25519 key is not this identity's: the
    /// relays serve the share to that other key, and whoever holds it chose to pair the two
    /// (Docs/FORMAT.md §17).
    public func recipientPosition(card: KeyCard) -> Int? {
        recipients.firstIndex { $0.card == card }
    }

    /// Whether the recipient with this signing key is one of them.
    public func isAddressed(to signingKey: [UInt8]) -> Bool {
        recipients.contains { Sodium.equal($0.card.signingKey, signingKey) }
    }

    /// Whether `other` is a share of the same message: every field but the index and the
    /// one-time key.
    public func agrees(with other: MessageHeader) -> Bool {
        common() == other.common()
    }

    /// The length of each piece: every share's is the same.
    public var pieceLength: UInt64 { Dispersal.pieceLength(dataLength: ciphertextLength, k: threshold) }

    /// At most 255 recipients (a group's members).
    public static let maximumRecipients = 255
    static let maximumLength = 16 + 16 + KeyCard.encodedLength + 1 + 1 + 8 + 8 + 1 + 3 + 8 + 32
        + 1 + maximumRecipients * (KeyCard.encodedLength + 8) + GroupRecord.maximumRelays * 32

    init(messageID: [UInt8], groupID: [UInt8], sender: KeyCard, kind: Kind, type: SecretType, createdAt: UInt64,
         expiresAt: UInt64, deleteWhenConfirmed: Bool, threshold: Int, count: Int, index: Int, ciphertextLength: UInt64,
         senderKey: [UInt8], recipients: [MessageRecipient], commitments: [[UInt8]]) {
        self.messageID = messageID
        self.groupID = groupID
        self.sender = sender
        self.kind = kind
        self.type = type
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.deleteWhenConfirmed = deleteWhenConfirmed
        self.threshold = threshold
        self.count = count
        self.index = index
        self.ciphertextLength = ciphertextLength
        self.senderKey = senderKey
        self.recipients = recipients
        self.commitments = commitments
    }

    func encoded() -> [UInt8] { encoded(index: index, senderKey: senderKey) }

    private func common() -> [UInt8] { encoded(index: 0, senderKey: [UInt8](repeating: 0, count: 32)) }

    private func encoded(index: Int, senderKey: [UInt8]) -> [UInt8] {
        var w = ByteWriter()
        w.raw(messageID)
        w.raw(groupID)
        w.raw(sender.encoded)
        w.u8(kind.rawValue)
        w.u8(type.rawValue)
        w.u64(createdAt)
        w.u64(expiresAt)
        w.u8(deleteWhenConfirmed ? 1 : 0)
        w.u8(UInt8(threshold))
        w.u8(UInt8(count))
        w.u8(UInt8(index))
        w.u64(ciphertextLength)
        w.raw(senderKey)
        w.u8(UInt8(recipients.count))
        for recipient in recipients {
            w.raw(recipient.card.encoded)
            w.u64(recipient.sequence)
        }
        commitments.forEach { w.raw($0) }
        return w.bytes
    }

    init(parsing bytes: [UInt8]) throws(VaultError) {
        func fail(_ detail: String) -> VaultError { .malformed(what: "the message share", detail: detail) }
        var r = ByteReader(bytes)
        do {
            messageID = try r.raw(16)
            groupID = try r.raw(16)
            sender = try KeyCard(encoded: try r.raw(KeyCard.encodedLength))
            guard let kind = Kind(rawValue: try r.u8()) else { throw fail("unknown message kind") }
            self.kind = kind
            guard let type = SecretType(rawValue: try r.u8()) else { throw fail("unknown secret type") }
            self.type = type
            createdAt = try r.u64()
            expiresAt = try r.u64()
            // A share is served until it expires; one that expires before it was made is a
            // clock or a forgery, and no reader can say which lifetime it meant.
            guard expiresAt > createdAt else { throw fail("it expires before it was created") }
            switch try r.u8() {
            case 0: deleteWhenConfirmed = false
            case 1: deleteWhenConfirmed = true
            default: throw fail("bad delete flag")
            }
            threshold = Int(try r.u8())
            count = Int(try r.u8())
            index = Int(try r.u8())
            guard threshold >= 2, threshold <= count, count <= GroupRecord.maximumRelays, index >= 1, index <= count else {
                throw fail("threshold \(threshold), count \(count), index \(index) out of range")
            }
            ciphertextLength = try r.u64()
            guard ciphertextLength <= Limits.maximumCiphertext, PayloadStream.plaintextLength(sealed: ciphertextLength) != nil else {
                throw fail("impossible ciphertext length")
            }
            senderKey = try r.raw(32)
            let recipientCount = Int(try r.u8())
            guard recipientCount >= 1 else { throw fail("it has no recipients") }
            recipients = try (0..<recipientCount).map { _ in
                MessageRecipient(card: try KeyCard(encoded: try r.raw(KeyCard.encodedLength)), sequence: try r.u64())
            }
            // Relays serve by the signing key and recipients open by the agreement key: a
            // key repeated under either would be two entries for one reader.
            guard Set(recipients.map(\.card.agreementKey)).count == recipientCount,
                  Set(recipients.map(\.card.signingKey)).count == recipientCount else { throw fail("a recipient appears twice") }
            // Keystores and stores keep numbers as signed 64-bit integers.
            guard recipients.allSatisfy({ $0.sequence <= UInt64(Int64.max) }) else { throw fail("a sequence number is above 2^63 - 1") }
            // A resend request or closed numbers go to one member, outside the numbering
            // (Docs/FORMAT.md §17).
            guard !kind.isNumberingNotice || (recipientCount == 1 && recipients[0].sequence == 0 && type == .note) else {
                throw fail("a resend request or closed numbers is a note to one recipient, numbered 0")
            }
            // 0 is outside the numbering: a content message numbered 0 would be received
            // without a number, so never counted as a repeat nor missed as a gap.
            guard kind.isNumberingNotice || recipients.allSatisfy({ $0.sequence >= 1 }) else {
                throw fail("a content message is numbered from 1 for each recipient")
            }
            commitments = try (0..<count).map { _ in try r.raw(32) }
            try r.end()
        } catch {
            throw VaultError.reading("the message share", error)
        }
        guard encoded() == bytes else { throw fail("the header is not canonically encoded") }
    }
}
