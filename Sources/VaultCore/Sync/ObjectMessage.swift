import CSodium
import Foundation

/// The signed header of an object message (Docs/FORMAT.md §19): item changes of one shared
/// key, sent whole (not split) to the key's holders in a group, through every relay of the
/// group. Its body is sealed to the recipients, so a relay sees who sends to whom, when and
/// how much, and nothing of which items changed.
public struct ObjectHeader: Equatable, Sendable {
    /// What an object message carries.
    public enum Kind: UInt8, Sendable {
        /// Changes (§18), newest first.
        case changes = 1
        /// A request for a holder's whole state of the key (`vault sync --full`); no entries.
        case snapshotRequest = 2
        /// A holder's whole state of the key: every change it knows, newest first.
        case snapshot = 3
        /// A step between a secret's holders (Docs/FORMAT.md §20): a share offer, a piece
        /// request, an answer. Its key id is 16 zero bytes and it has one recipient: which
        /// step, and which secret, is sealed inside.
        case holder = 4
    }

    /// 128 random bits.
    public let messageID: [UInt8]
    /// The group it goes through.
    public let groupID: [UInt8]
    /// The sender's card; the header is signed with its Ed25519 key.
    public let sender: KeyCard
    /// What it carries.
    public let kind: Kind
    /// The shared key whose items it is about.
    public let keyID: [UInt8]
    /// Unix seconds when it was sent.
    public let createdAt: UInt64
    /// Unix seconds after which relays must no longer serve it.
    public let expiresAt: UInt64
    /// Whether relays delete it once every recipient confirmed it.
    public let deleteWhenConfirmed: Bool
    /// The one-time X25519 key its boxes were sealed with.
    public let senderKey: [UInt8]
    /// Bytes of the sealed body.
    public let bodyLength: UInt64
    /// SHA-256 of the sealed body: a relay checks it without opening anything.
    public let bodyHash: [UInt8]
    /// The recipients, in the order of their boxes.
    public let recipients: [KeyCard]

    /// The id as 32 hex digits.
    public var messageIDHex: String { messageID.hex }

    static let fixedLength = 16 + 16 + KeyCard.encodedLength + 1 + 16 + 8 + 8 + 1 + 32 + 8 + 32 + 1
    static let maximumLength = fixedLength + MessageHeader.maximumRecipients * KeyCard.encodedLength

    func encoded() -> [UInt8] {
        var w = ByteWriter()
        w.raw(messageID)
        w.raw(groupID)
        w.raw(sender.encoded)
        w.u8(kind.rawValue)
        w.raw(keyID)
        w.u64(createdAt)
        w.u64(expiresAt)
        w.u8(deleteWhenConfirmed ? 1 : 0)
        w.raw(senderKey)
        w.u64(bodyLength)
        w.raw(bodyHash)
        w.u8(UInt8(recipients.count))
        recipients.forEach { w.raw($0.encoded) }
        return w.bytes
    }

    init(messageID: [UInt8], groupID: [UInt8], sender: KeyCard, kind: Kind, keyID: [UInt8], createdAt: UInt64, expiresAt: UInt64,
         deleteWhenConfirmed: Bool, senderKey: [UInt8], bodyLength: UInt64, bodyHash: [UInt8], recipients: [KeyCard]) {
        self.messageID = messageID
        self.groupID = groupID
        self.sender = sender
        self.kind = kind
        self.keyID = keyID
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.deleteWhenConfirmed = deleteWhenConfirmed
        self.senderKey = senderKey
        self.bodyLength = bodyLength
        self.bodyHash = bodyHash
        self.recipients = recipients
    }

    init(parsing bytes: [UInt8]) throws(VaultError) {
        func fail(_ detail: String) -> VaultError { .malformed(what: "the object message", detail: detail) }
        var r = ByteReader(bytes)
        do {
            messageID = try r.raw(16)
            groupID = try r.raw(16)
            sender = try KeyCard(encoded: try r.raw(KeyCard.encodedLength))
            guard let kind = Kind(rawValue: try r.u8()) else { throw fail("unknown kind") }
            self.kind = kind
            keyID = try r.raw(16)
            createdAt = try r.u64()
            expiresAt = try r.u64()
            guard expiresAt > createdAt else { throw fail("it expires before it was created") }
            switch try r.u8() {
            case 0: deleteWhenConfirmed = false
            case 1: deleteWhenConfirmed = true
            default: throw fail("bad delete flag")
            }
            senderKey = try r.raw(32)
            bodyLength = try r.u64()
            guard bodyLength <= IncomingMessageShare.largest, SecretStream.plaintextLength(sealed: bodyLength) != nil else {
                throw fail("impossible body length")
            }
            bodyHash = try r.raw(32)
            let count = Int(try r.u8())
            guard count >= 1 else { throw fail("it has no recipients") }
            recipients = try (0..<count).map { _ in try KeyCard(encoded: try r.raw(KeyCard.encodedLength)) }
            guard Set(recipients.map(\.agreementKey)).count == count, Set(recipients.map(\.signingKey)).count == count else {
                throw fail("a recipient appears twice")
            }
            // A request for a snapshot goes to holders; a snapshot answers one of them.
            guard kind != .snapshot || count == 1 else { throw fail("a snapshot goes to one recipient") }
            guard kind != .holder || (count == 1 && keyID.allSatisfy { $0 == 0 }) else {
                throw fail("a holder message goes to one recipient and names no key")
            }
            try r.end()
        } catch {
            throw VaultError.reading("the object message", error)
        }
    }

    /// Whether the recipient with this signing key is one of them.
    public func isAddressed(to signingKey: [UInt8]) -> Bool { recipients.contains { Sodium.equal($0.signingKey, signingKey) } }
}

/// Writing and opening object messages (Docs/FORMAT.md §19):
///
///     "VLTO" ‖ version 0x01 ‖ header length (4) ‖ header ‖ signature (64)
///     ‖ per recipient: nonce (24) ‖ box (80) ‖ body
///
/// Each box is `crypto_box` from the header's one-time key to one recipient, over the body
/// key (32) ‖ BLAKE2b(header) (32); the body is a secretstream under the body key, whose
/// plaintext is the entries (``ObjectEntries``).
public enum ObjectMessage {
    static let magic: [UInt8] = Array("VLTO".utf8)
    static let version: UInt8 = 1
    static let signatureDomain = Array("vault/v1/object-message".utf8)

    /// What an object message is sent as.
    public struct Request: Sendable {
        public var groupID: [UInt8]
        public var kind: ObjectHeader.Kind
        public var keyID: [UInt8]
        public var recipients: [KeyCard]
        public var lifetime: UInt64
        public var deleteWhenConfirmed: Bool

        public init(groupID: [UInt8], kind: ObjectHeader.Kind, keyID: [UInt8], recipients: [KeyCard], lifetime: UInt64,
                    deleteWhenConfirmed: Bool) {
            self.groupID = groupID
            self.kind = kind
            self.keyID = keyID
            self.recipients = recipients
            self.lifetime = lifetime
            self.deleteWhenConfirmed = deleteWhenConfirmed
        }
    }

    /// Writes an object message into a new file of `spool`: `entries` writes the body's
    /// plaintext, which is sealed as it comes (into a second spool file, since the signed
    /// header names the sealed body's hash). Returns the file's path and the header.
    public static func write(_ request: Request, entries: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void, sender: Identity,
                             spool: Spool, random: some RandomSource = SecureRandom()) throws -> (path: String, header: ObjectHeader) {
        precondition(!request.recipients.isEmpty && request.recipients.count <= MessageHeader.maximumRecipients)
        let bodyKey = random.secureBytes(32)
        let sealedPath = spool.newPath("object.body")
        defer { unlink(sealedPath) }
        let sealed = try OutputFile(path: sealedPath)
        let hasher = SHA256Hasher()
        var bodyLength: UInt64 = 0
        let sealer = try StreamSealer(key: bodyKey) { bytes in
            hasher.update(bytes)
            bodyLength += UInt64(bytes.count)
            guard bodyLength <= IncomingMessageShare.largest else { throw VaultError.invalidSecret("the changes are over 1 GiB") }
            try sealed.write(bytes)
        }
        try entries(sealer.write)
        try sealer.finish()
        try sealed.commit()
        let oneTime = OneTimeKey(random: random)
        let now = VaultClock.seconds()
        let header = ObjectHeader(messageID: random.bytes(16), groupID: request.groupID, sender: sender.card, kind: request.kind,
                                  keyID: request.keyID, createdAt: now, expiresAt: now + request.lifetime,
                                  deleteWhenConfirmed: request.deleteWhenConfirmed, senderKey: oneTime.publicKey,
                                  bodyLength: bodyLength, bodyHash: hasher.finish(), recipients: request.recipients)
        let path = spool.newPath("object.vmsg")
        do {
            let output = try OutputFile(path: path)
            try SignedFrame.make(magic: magic, version: version, body: header.encoded(), domain: signatureDomain, signer: sender)
                .withUnsafeBytes { try output.write($0) }
            let headerHash = Sodium.blake2b(key: "vault/v1/object", header.encoded())
            for recipient in request.recipients {
                let box = Box.seal([bodyKey, SecureBytes(copying: headerHash)], to: recipient.agreementKey, secretKey: oneTime.secretKey,
                                   random: random)
                try box.withUnsafeBytes { try output.write($0) }
            }
            var source = try FileSource(path: sealedPath)
            try source.forEachChunk { try output.write($0) }
            try output.commit()
        } catch {
            unlink(path)
            throw error
        }
        return (path, header)
    }

    /// Opens a checked message (``IncomingObjectMessage``, whose bytes are in the file at
    /// `path`) for `recipient`: its box gives the body key, and the body's plaintext goes to
    /// `emit`, authenticated chunk by chunk; the end is checked before this returns.
    public static func open(_ message: IncomingObjectMessage, path: String, recipient: Identity,
                            emit: @escaping (UnsafeRawBufferPointer) throws -> Void) throws {
        guard let header = message.header else { throw VaultError.truncated(what: "the object message") }
        // By the whole card, as for message shares (Docs/FORMAT.md §19).
        guard let position = header.recipients.firstIndex(of: recipient.card) else {
            throw VaultError.notForThisIdentity(what: "the object message")
        }
        let boxes = message.boxes
        let box = Array(boxes[(position * MessageShare.boxLength)..<((position + 1) * MessageShare.boxLength)])
        guard let plain = Box.open(box, from: header.senderKey, to: recipient), plain.count == 64 else {
            throw VaultError.damaged(what: "the object message", detail: "its sealed key does not open")
        }
        let bound = plain.slice(32..<64).withUnsafeBytes(Array.init)
        guard Sodium.equal(bound, Sodium.blake2b(key: "vault/v1/object", header.encoded())) else {
            throw VaultError.malformed(what: "the object message", detail: "its sealed key belongs to another header")
        }
        let opener = StreamOpener(key: plain.slice(0..<32), emit: emit)
        let source = try FileSource(path: path)
        var skip = message.prefixLength + boxes.count
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        do {
            while true {
                let count = try buffer.withUnsafeMutableBytes { try source.read(into: $0) }
                if count == 0 { break }
                let from = min(skip, count)
                skip -= from
                if from < count { try buffer.withUnsafeBytes { try opener.write(UnsafeRawBufferPointer(rebasing: $0[from..<count])) } }
            }
            try opener.finish()
        } catch is SecretStream.Failure {
            throw VaultError.damaged(what: "the object message", detail: "its body does not open")
        }
    }
}

/// An object message read as it arrives (an upload at a relay, a download at a recipient):
/// the signed header is checked as soon as it is in, and the body is hashed on the way, so
/// a message whose body is not the one its sender signed is refused at its end.
public struct IncomingObjectMessage {
    /// The verified header, once the prefix is in.
    public private(set) var header: ObjectHeader?
    /// Bytes of the prefix (magic to signature).
    public var prefixLength: Int { reader.prefixLength }
    /// The whole message's length, by its header.
    public var length: UInt64 { reader.length }
    /// The recipients' boxes, once they are in.
    public var boxes: [UInt8] { reader.boxes }
    private var reader: BoxedFrameReader
    private let hasher = SHA256Hasher()

    /// Whether `start` (at least 4 bytes) begins an object message rather than a share.
    public static func starts(_ start: some Collection<UInt8>) -> Bool { Array(start.prefix(4)) == ObjectMessage.magic }

    /// Ready for a message of at most `maximumLength` bytes.
    public init(maximumLength: UInt64) {
        reader = BoxedFrameReader(magic: ObjectMessage.magic, version: ObjectMessage.version, what: "the object message",
                                  maximumHeaderLength: ObjectHeader.maximumLength, maximumLength: maximumLength)
    }

    /// Takes the next bytes; throws as soon as they cannot be a valid message.
    public mutating func take(_ bytes: UnsafeRawBufferPointer) throws(VaultError) {
        var parsed: ObjectHeader?
        let hasher = self.hasher
        try reader.take(bytes, header: { encoded, signature throws(VaultError) in
            let header = try ObjectHeader(parsing: encoded)
            guard header.encoded() == encoded else {
                throw .malformed(what: "the object message", detail: "the header is not canonically encoded")
            }
            guard header.sender.verify(signature: signature, of: ObjectMessage.signatureDomain + encoded) else {
                throw .badSignature(what: "the object message")
            }
            parsed = header
            return .init(boxes: header.recipients.count, rest: header.bodyLength)
        }, rest: { hasher.update($0) })
        if let parsed { header = parsed }
    }

    /// Checks that the whole message came, and that its body is the one its sender signed.
    public mutating func finish() throws(VaultError) {
        guard let header, reader.isComplete else { throw .truncated(what: "the object message") }
        guard Sodium.equal(hasher.finish(), header.bodyHash) else {
            throw .corruptSecret("the object message's body is not the one its sender signed")
        }
    }
}
