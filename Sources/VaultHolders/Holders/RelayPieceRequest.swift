import VaultCore
import CSodium
import Foundation

/// A request for one holder's piece that travels through a group's relays (Docs/FORMAT.md
/// §20). It cannot be bound to a Noise channel as a request over the LAN is
/// (``PossessionProof``), so it binds to what it carries:
///
///     fields    = secret id (16) ‖ dealer card (65) ‖ holder card (65) ‖ requester index (1)
///                 ‖ requester card (65) ‖ reply key (32) ‖ nonce (16) ‖ created (8) ‖ expires (8)
///     request   = fields ‖ proof (64) ‖ signature (64)
///     proof     = Ed25519 by the proof-of-possession key of the requester's index over
///                 "vault/v1/relay-pop" ‖ fields (64 zero bytes for requester index 0)
///     signature = Ed25519 by the requester card's key over "vault/v1/relay-piece-request" ‖ fields ‖ proof
///
/// - the holder asked (its card) and the secret with its dealer: another holder, or
///   another secret, refuses it;
/// - the reply key: the piece is sealed to it, so whoever redirects the answer holds sealed
///   bytes;
/// - a nonce, remembered by each holder until the expiry, and an expiry: it is answered
///   once, and not after its time.
///
/// Requester index 0 is a requester that holds no share (a new machine of the secret's
/// owner): it proves nothing, and its holder is told so and never releases without asking.
public struct RelayPieceRequest: Equatable, Sendable {
    public let secretID: [UInt8]
    /// The dealer: a secret is the dealer's and its id together.
    public let dealer: KeyCard
    /// The holder asked.
    public let holder: KeyCard
    /// The requester's own index, or 0 when it holds no share.
    public let requester: Int
    public let requesterCard: KeyCard
    /// The X25519 key the answer's key share is sealed to.
    public let replyKey: [UInt8]
    public let nonce: [UInt8]
    /// Unix seconds.
    public let created: UInt64
    public let expires: UInt64
    let proof: [UInt8]
    let signature: [UInt8]

    static let fieldsLength = 16 + 3 * KeyCard.encodedLength + 1 + 32 + 16 + 8 + 8
    /// The whole request's length.
    static let length = fieldsLength + 64 + 64
    static let proofDomain = Array("vault/v1/relay-pop".utf8)
    static let signatureDomain = Array("vault/v1/relay-piece-request".utf8)
    /// The longest a request may live: friends answer within days, and a holder remembers
    /// every nonce until its request expires.
    public static let maximumLifetime: UInt64 = 7 * 86_400
    /// How far a request's creation may lie ahead of the holder's clock.
    static let clockSkew: UInt64 = 300

    /// Whether it is a request from someone who holds no share of the secret.
    public var holdsNoShare: Bool { requester == 0 }

    /// Makes a request to `holder` for its piece of (`dealer`, `secretID`), with `replyKey`'s
    /// public half. With `own` (this identity's share of the secret) it proves possession of
    /// it; without, it comes from someone who holds no share. `lifetime` is cut to
    /// ``maximumLifetime``.
    public static func make(secretID: [UInt8], dealer: KeyCard, holder: KeyCard, own: StoredSecret?, identity: Identity, replyKey: [UInt8],
                     lifetime: UInt64, now: UInt64 = VaultClock.seconds(),
                     random: some RandomSource = SecureRandom()) throws(VaultError) -> RelayPieceRequest {
        let requester = own?.header.holderIndex ?? 0
        var request = RelayPieceRequest(secretID: secretID, dealer: dealer, holder: holder, requester: requester, requesterCard: identity.card,
                                        replyKey: replyKey, nonce: random.bytes(16), created: now, expires: now + min(lifetime, maximumLifetime),
                                        proof: [UInt8](repeating: 0, count: 64), signature: [])
        let fields = request.fields()
        if let secret = own {
            let header = secret.header
            let keyShare = try ShareBundle.openBox(secret.box, header: header, holder: identity)
            let (_, proofKey) = BundleHeader.possessionKeyPair(secretID: header.secretID, index: header.holderIndex, keyShare: keyShare,
                                                               commitment: header.commitments[header.holderIndex - 1])
            let message = proofDomain + fields
            var proof = [UInt8](repeating: 0, count: Int(crypto_sign_BYTES))
            proofKey.withUnsafeBytes { sk in
                _ = crypto_sign_detached(&proof, nil, message, UInt64(message.count), sk.bindMemory(to: UInt8.self).baseAddress!)
            }
            request = RelayPieceRequest(copying: request, proof: proof, signature: [])
        }
        return RelayPieceRequest(copying: request, proof: request.proof, signature: identity.sign(signatureDomain + fields + request.proof))
    }

    private init(secretID: [UInt8], dealer: KeyCard, holder: KeyCard, requester: Int, requesterCard: KeyCard, replyKey: [UInt8], nonce: [UInt8],
                 created: UInt64, expires: UInt64, proof: [UInt8], signature: [UInt8]) {
        self.secretID = secretID
        self.dealer = dealer
        self.holder = holder
        self.requester = requester
        self.requesterCard = requesterCard
        self.replyKey = replyKey
        self.nonce = nonce
        self.created = created
        self.expires = expires
        self.proof = proof
        self.signature = signature
    }

    private init(copying other: RelayPieceRequest, proof: [UInt8], signature: [UInt8]) {
        self.init(secretID: other.secretID, dealer: other.dealer, holder: other.holder, requester: other.requester,
                  requesterCard: other.requesterCard, replyKey: other.replyKey, nonce: other.nonce, created: other.created,
                  expires: other.expires, proof: proof, signature: signature)
    }

    func fields() -> [UInt8] {
        var w = ByteWriter()
        w.raw(secretID)
        w.raw(dealer.encoded)
        w.raw(holder.encoded)
        w.u8(UInt8(requester))
        w.raw(requesterCard.encoded)
        w.raw(replyKey)
        w.raw(nonce)
        w.u64(created)
        w.u64(expires)
        return w.bytes
    }

    /// The request as it travels.
    func encoded() -> [UInt8] { fields() + proof + signature }

    /// Parses a request and checks what it can alone: its layout, its lifetime's bound and
    /// its requester's signature. What needs the holder's keystore (trust, the share, the
    /// proof, the nonce, the clock) is ``ConsentCheck``'s.
    init(parsing bytes: [UInt8]) throws(VaultError) {
        func fail(_ detail: String) -> VaultError { .malformed(what: "the piece request", detail: detail) }
        guard bytes.count == Self.length else { throw fail("it is \(bytes.count) bytes, not \(Self.length)") }
        var r = ByteReader(bytes)
        do {
            secretID = try r.raw(16)
            dealer = try KeyCard(encoded: try r.raw(KeyCard.encodedLength))
            holder = try KeyCard(encoded: try r.raw(KeyCard.encodedLength))
            requester = Int(try r.u8())
            requesterCard = try KeyCard(encoded: try r.raw(KeyCard.encodedLength))
            replyKey = try r.raw(32)
            nonce = try r.raw(16)
            created = try r.u64()
            expires = try r.u64()
            proof = try r.raw(64)
            signature = try r.raw(64)
            try r.end()
        } catch {
            throw VaultError.reading("the piece request", error)
        }
        guard holder != requesterCard else { throw fail("it asks the requester itself") }
        // The piece is sealed to it: a key of small order would make every box's shared
        // secret zero (and crypto_box refuses it).
        guard KeyCard.isUsableAgreementKey(replyKey) else { throw fail("its reply key is not a usable X25519 key") }
        guard expires <= UInt64(Int64.max) else { throw fail("its lifetime is out of range") }
        guard expires > created, expires - created <= Self.maximumLifetime else { throw fail("its lifetime is out of range") }
        guard requester != 0 || proof.allSatisfy({ $0 == 0 }) else { throw fail("a request without a share carries a proof") }
        guard requesterCard.verify(signature: signature, of: Self.signatureDomain + fields() + proof) else {
            throw .badSignature(what: "the piece request")
        }
    }

    /// Whether the proof shows that the requester holds share `requester` of `header`'s secret.
    func provesPossession(of header: BundleHeader) -> Bool {
        guard requester >= 1, requester <= header.count else { return false }
        let message = Self.proofDomain + fields()
        return crypto_sign_verify_detached(proof, message, UInt64(message.count), header.possessionKeys[requester - 1]) == 0
    }
}
