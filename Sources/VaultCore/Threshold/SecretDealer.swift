import Foundation

/// What to share, with whom, and how.
public struct ShareRequest {
    /// The kind of secret.
    public var type: SecretType
    /// Encrypted fields besides the content.
    public var metadata: SecretMetadata
    /// Public text stored in every header.
    public var description: String
    /// k: pieces needed to recover.
    public var threshold: Int
    /// The other holders, in index order from 2; the dealer is index 1.
    public var holders: [(label: Label, card: KeyCard)]
    /// Publish every holder's label in the headers.
    public var publishLabels: Bool
    /// A password layer, when given.
    public var password: SecureBytes?
    /// The password layer's scrypt cost.
    public var scrypt: ScryptParameters
    /// The secret this one replaces (resharing).
    public var replaces: [UInt8]?
    /// For a key: the id of the key it carries, when resharing the same key value. A new key
    /// takes the new secret's id.
    public var keyID: [UInt8]?

    public init(type: SecretType, metadata: SecretMetadata = SecretMetadata(), description: String = "",
                threshold: Int, holders: [(label: Label, card: KeyCard)], publishLabels: Bool = false,
                password: SecureBytes? = nil, scrypt: ScryptParameters = .default, replaces: [UInt8]? = nil,
                keyID: [UInt8]? = nil) {
        self.keyID = keyID
        self.type = type
        self.metadata = metadata
        self.description = description
        self.threshold = threshold
        self.holders = holders
        self.publishLabels = publishLabels
        self.password = password
        self.scrypt = scrypt
        self.replaces = replaces
    }
}

/// Turns a secret into n share bundles: encrypt under a fresh data key, split the key with
/// Shamir, disperse the ciphertext, seal each key share to its holder.
public enum SecretDealer {
    /// Streams `content` through the layers into `outputs` (index order: the dealer's own
    /// first, then `request.holders`). Returns the dealer's header. The outputs are written
    /// but not committed: the caller commits them once it has also stored its own share.
    public static func share(
        _ request: ShareRequest, content: some ByteSource, dealer: Identity, outputs: [OutputFile],
        random: some RandomSource = SecureRandom()
    ) throws -> [BundleHeader] {
        let n = request.holders.count + 1, k = request.threshold
        guard k >= 2, k <= n, n <= 255 else { throw VaultError.invalidThreshold(k: k, n: n) }
        precondition(outputs.count == n)
        guard request.description.utf8.count <= BundleHeader.maximumDescription else {
            throw VaultError.invalidSecret("the description is longer than \(BundleHeader.maximumDescription) bytes")
        }
        try request.metadata.validate()
        let holders: [(label: Label, card: KeyCard)] = [(dealer.label, dealer.card)] + request.holders
        guard Set(holders.map(\.card.agreementKey)).count == n else {
            throw VaultError.invalidSecret("a holder appears twice")
        }

        let secretID = random.bytes(16)
        let dataKey = random.secureBytes(32)
        let keyShares = Shamir.split(dataKey, threshold: k, count: n, random: random)
        // One key pair per box, dropped when this returns (ShareBundle says why).
        let oneTimeKeys = (0..<n).map { _ in OneTimeKey(random: random) }

        // The prefix and box have a size known now; reserve them and fill them in at the end.
        func header(index: Int, ciphertextLength: UInt64, commitments: [[UInt8]], keys: [[UInt8]]) -> BundleHeader {
            BundleHeader(
                secretID: secretID, createdAt: VaultClock.seconds(), type: request.type,
                description: request.description, threshold: k, count: n, holderIndex: index,
                ciphertextLength: ciphertextLength, dealer: dealer.card, holderKey: holders[index - 1].card.agreementKey,
                senderKey: oneTimeKeys[index - 1].publicKey, passwordProtected: request.password != nil, replaces: request.replaces,
                keyID: request.type == .key ? request.keyID ?? secretID : nil,
                labels: request.publishLabels ? holders.map(\.label) : nil, commitments: commitments,
                possessionKeys: keys, holderTags: holders.map { BundleHeader.holderTag(secretID: secretID, agreementKey: $0.card.agreementKey) })
        }
        let zero = [[UInt8]](repeating: [UInt8](repeating: 0, count: 32), count: n)
        let reserved = ShareBundle.prefix(header: header(index: 1, ciphertextLength: 0, commitments: zero, keys: zero),
                                          signer: dealer).count + ShareBundle.bodyPrefixLength
        for output in outputs { try [UInt8](repeating: 0, count: reserved).withUnsafeBytes { try output.write($0) } }

        // plaintext → payload stream → dispersal → per piece a commitment and the piece,
        // written as it is (ShareBundle says why it is not sealed again), a chunk at a time
        // on every core.
        let salt = random.bytes(PasswordLayer.saltLength)
        let passwordKey = request.password.map { request.scrypt.deriveKey(passphrase: $0, salt: salt) }
        // The payload's fields (a file name, a username, a URL) are secret too: their one
        // unlocked copy is wiped once the lanes have sealed it.
        var payloadHeader = PayloadHeader.encode(type: request.type.rawValue, metadata: request.metadata)
        defer { payloadHeader.wipe() }
        // A key secret is exactly 32 bytes: recovery refuses any other length.
        let plaintext = try OuterPlaintext(
            content: content, prefix: PasswordLayer.header(parameters: request.password.map { _ in request.scrypt }, salt: salt),
            payloadHeader: payloadHeader,
            passwordKey: passwordKey, maximumContent: request.type == .key ? SharedKey.length : nil)
        let (ciphertextLength, commitments) = try DealLanes(key: dataKey, k: k, n: n, outputs: outputs, offset: UInt64(reserved))
            .run(plaintext)
        guard request.type != .key || plaintext.contentLength == SharedKey.length else {
            throw VaultError.invalidSecret("a key is \(SharedKey.length) bytes, and this one has \(plaintext.contentLength)")
        }

        let possessionKeys = (0..<n).map { j in
            BundleHeader.possessionKeyPair(secretID: secretID, index: j + 1, keyShare: keyShares[j], commitment: commitments[j]).publicKey
        }
        var headers: [BundleHeader] = []
        for j in 0..<n {
            let final = header(index: j + 1, ciphertextLength: ciphertextLength, commitments: commitments, keys: possessionKeys)
            let prefix = ShareBundle.prefix(header: final, signer: dealer)
            let box = ShareBundle.sealBox(keyShare: keyShares[j], header: final, oneTime: oneTimeKeys[j], random: random)
            precondition(prefix.count + box.count == reserved)
            try outputs[j].write(prefix + box, at: 0)
            headers.append(final)
        }
        return headers
    }
}
