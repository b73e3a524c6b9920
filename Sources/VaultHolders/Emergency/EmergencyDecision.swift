import VaultCore
import Foundation

/// A dealer's answer to an emergency request that its holders told it of (Docs/FORMAT.md
/// §21): a denial, which cancels the wait wherever it arrives before the wait ends, or an
/// approval, which ends the wait at once.
///
///     fields    = version 0x01 ‖ secret id (16) ‖ dealer card (65) ‖ trustee card (65)
///                 ‖ reply key (32) ‖ decision (1: 1 deny, 2 approve) ‖ issued (8, Unix seconds)
///     decision  = fields ‖ signature (64)
///     signature = Ed25519 by the dealer card's key over "vault/v1/emergency-decision" ‖ fields
///
/// It names the trustee's recovery by its one-time reply key, which every request of one
/// recovery carries to every holder: one decision covers the requests the dealer was told
/// of and those it was not (a holder whose notice was lost), and no other recovery. A
/// relay that replays it can only repeat what it said about that recovery.
public struct EmergencyDecision: Equatable, Sendable {
    public let secretID: [UInt8]
    public let dealer: KeyCard
    public let trustee: KeyCard
    /// The reply key of the trustee's recovery (``RelayPieceRequest/replyKey``).
    public let replyKey: [UInt8]
    /// True: release now; false: deny.
    public let approves: Bool
    public let issued: UInt64
    let signature: [UInt8]

    static let version = DealerSignedRecord.version
    /// The decision's length as it travels: 252 bytes.
    static let length = 1 + 16 + 2 * KeyCard.encodedLength + 32 + 1 + 8 + 64
    static let domain = Array("vault/v1/emergency-decision".utf8)

    /// The keystore's key of the secret it is about.
    public var secretRow: [UInt8] { BundleHeader.rowID(dealer: dealer, secretID: secretID) }

    /// `identity`'s decision about `trustee`'s recovery of its secret `secretID`.
    public static func make(secretID: [UInt8], dealer identity: Identity, trustee: KeyCard, replyKey: [UInt8], approves: Bool,
                            issued: UInt64 = VaultClock.seconds()) -> EmergencyDecision {
        signed(secretID: secretID, dealer: identity.card, trustee: trustee, replyKey: replyKey, approves: approves, issued: issued, by: identity)
    }

    /// A decision with these fields signed by `signer`, whoever that is (tests forge them).
    static func signed(secretID: [UInt8], dealer: KeyCard, trustee: KeyCard, replyKey: [UInt8], approves: Bool, issued: UInt64,
                       by signer: Identity) -> EmergencyDecision {
        let fields = fields(secretID: secretID, dealer: dealer, trustee: trustee, replyKey: replyKey, approves: approves, issued: issued)
        return EmergencyDecision(secretID: secretID, dealer: dealer, trustee: trustee, replyKey: replyKey, approves: approves, issued: issued,
                                 signature: signer.sign(domain + fields))
    }

    private init(secretID: [UInt8], dealer: KeyCard, trustee: KeyCard, replyKey: [UInt8], approves: Bool, issued: UInt64, signature: [UInt8]) {
        self.secretID = secretID
        self.dealer = dealer
        self.trustee = trustee
        self.replyKey = replyKey
        self.approves = approves
        self.issued = issued
        self.signature = signature
    }

    private static func fields(secretID: [UInt8], dealer: KeyCard, trustee: KeyCard, replyKey: [UInt8], approves: Bool,
                               issued: UInt64) -> [UInt8] {
        var w = ByteWriter()
        w.u8(version)
        w.raw(secretID)
        w.raw(dealer.encoded)
        w.raw(trustee.encoded)
        w.raw(replyKey)
        w.u8(approves ? 2 : 1)
        w.u64(issued)
        return w.bytes
    }

    /// The decision as it travels and is kept.
    public var encoded: [UInt8] {
        Self.fields(secretID: secretID, dealer: dealer, trustee: trustee, replyKey: replyKey, approves: approves, issued: issued) + signature
    }

    /// Parses a decision and checks its layout and the dealer's signature.
    public init(parsing bytes: [UInt8]) throws(VaultError) {
        func fail(_ detail: String) -> VaultError { .malformed(what: "the emergency decision", detail: detail) }
        let ((secretID, dealer, trustee, replyKey, code, issued), signature) = try DealerSignedRecord.read(
            bytes, what: "the emergency decision", length: Self.length, domain: Self.domain,
            fields: { r in
                (try r.raw(16), try KeyCard(encoded: try r.raw(KeyCard.encodedLength)), try KeyCard(encoded: try r.raw(KeyCard.encodedLength)),
                 try r.raw(32), try r.u8(), try r.u64())
            }, dealer: \.1)
        guard code == 1 || code == 2 else { throw fail("an unknown decision \(code)") }
        guard issued <= UInt64(Int64.max) else { throw fail("its time is out of range") }
        guard trustee != dealer else { throw fail("the dealer names itself") }
        self.init(secretID: secretID, dealer: dealer, trustee: trustee, replyKey: replyKey, approves: code == 2, issued: issued,
                  signature: signature)
    }
}
