import Foundation

/// What to send through a group's relays, to whom, and how.
public struct MessageRequest {
    /// The group it is sent in.
    public var groupID: [UInt8]
    /// What it carries.
    public var kind: MessageHeader.Kind
    /// The kind of secret.
    public var type: SecretType
    /// Encrypted fields besides the content (a file's name).
    public var metadata: SecretMetadata
    /// k: shares needed to read it, 2 … n.
    public var threshold: Int
    /// Who may read it, with each one's sequence number.
    public var recipients: [MessageRecipient]
    /// Seconds the relays keep it.
    public var lifetime: UInt64
    /// Whether relays delete it once every recipient confirmed it.
    public var deleteWhenConfirmed: Bool

    /// A request; ``MessageDealer/deal(_:content:sender:outputs:random:)`` checks it.
    public init(groupID: [UInt8], kind: MessageHeader.Kind = .content, type: SecretType, metadata: SecretMetadata = SecretMetadata(),
                threshold: Int, recipients: [MessageRecipient], lifetime: UInt64, deleteWhenConfirmed: Bool) {
        self.groupID = groupID
        self.kind = kind
        self.type = type
        self.metadata = metadata
        self.threshold = threshold
        self.recipients = recipients
        self.lifetime = lifetime
        self.deleteWhenConfirmed = deleteWhenConfirmed
    }
}

/// Turns a message into one share a relay: encrypt under a fresh data key, split the key
/// with Shamir, disperse the ciphertext (as ``SecretDealer`` does, through the same
/// lanes), and seal each relay's key share to every recipient.
public enum MessageDealer {
    /// Streams `content` into `outputs` (one a relay, in the group's relay order) and
    /// returns their headers. The outputs are written but not committed.
    public static func deal(
        _ request: MessageRequest, content: some ByteSource, sender: Identity, outputs: [OutputFile],
        random: some RandomSource = SecureRandom()
    ) throws -> [MessageHeader] {
        let n = outputs.count, k = request.threshold
        guard k >= 2, k <= n, n <= GroupRecord.maximumRelays else { throw VaultError.invalidThreshold(k: k, n: n) }
        guard (1...MessageHeader.maximumRecipients).contains(request.recipients.count),
              Set(request.recipients.map(\.card.agreementKey)).count == request.recipients.count,
              Set(request.recipients.map(\.card.signingKey)).count == request.recipients.count else {
            throw VaultError.invalidSecret("a message has 1 to \(MessageHeader.maximumRecipients) distinct recipients")
        }
        guard request.kind.isNumberingNotice || request.recipients.allSatisfy({ $0.sequence >= 1 }) else {
            throw VaultError.invalidSecret("a content message is numbered from 1 for each recipient")
        }
        guard request.lifetime >= 1 else { throw VaultError.invalidSecret("a message lives at least a second") }
        precondition(request.groupID.count == 16)
        try request.metadata.validate()

        let messageID = random.bytes(16)
        let dataKey = random.secureBytes(32)
        let keyShares = Shamir.split(dataKey, threshold: k, count: n, random: random)
        let oneTimeKeys = (0..<n).map { _ in OneTimeKey(random: random) }
        let now = VaultClock.seconds()
        func header(index: Int, ciphertextLength: UInt64, commitments: [[UInt8]]) -> MessageHeader {
            MessageHeader(messageID: messageID, groupID: request.groupID, sender: sender.card, kind: request.kind, type: request.type,
                          createdAt: now, expiresAt: now + request.lifetime, deleteWhenConfirmed: request.deleteWhenConfirmed,
                          threshold: k, count: n, index: index, ciphertextLength: ciphertextLength,
                          senderKey: oneTimeKeys[index - 1].publicKey, recipients: request.recipients, commitments: commitments)
        }
        // Every field has a fixed size: reserve the prefix and boxes, fill them in at the end.
        let zero = [[UInt8]](repeating: [UInt8](repeating: 0, count: 32), count: n)
        let reserved = MessageShare.prefix(header: header(index: 1, ciphertextLength: 0, commitments: zero), signer: sender).count
            + request.recipients.count * MessageShare.boxLength
        for output in outputs { try [UInt8](repeating: 0, count: reserved).withUnsafeBytes { try output.write($0) } }

        var payloadHeader = PayloadHeader.encode(type: request.type.rawValue, metadata: request.metadata)
        defer { payloadHeader.wipe() }
        let plaintext = try OuterPlaintext(
            content: content, prefix: PasswordLayer.header(parameters: nil, salt: []), payloadHeader: payloadHeader,
            passwordKey: nil, maximumContent: request.type == .key ? SharedKey.length : nil)
        let (ciphertextLength, commitments) = try DealLanes(key: dataKey, k: k, n: n, outputs: outputs, offset: UInt64(reserved))
            .run(plaintext)
        guard request.type != .key || plaintext.contentLength == SharedKey.length else {
            throw VaultError.invalidSecret("a key is \(SharedKey.length) bytes, and this one has \(plaintext.contentLength)")
        }

        var headers: [MessageHeader] = []
        for j in 0..<n {
            let final = header(index: j + 1, ciphertextLength: ciphertextLength, commitments: commitments)
            var bytes = MessageShare.prefix(header: final, signer: sender)
            for position in request.recipients.indices {
                bytes += MessageShare.sealBox(keyShare: keyShares[j], header: final, position: position, oneTime: oneTimeKeys[j], random: random)
            }
            precondition(bytes.count == reserved)
            try outputs[j].write(bytes, at: 0)
            headers.append(final)
        }
        return headers
    }
}
