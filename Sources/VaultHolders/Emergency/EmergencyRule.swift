import VaultCore
import Foundation

/// A secret's emergency rule (Docs/FORMAT.md §21): its dealer names, in advance, one
/// trusted person who may have the secret after a wait, unless the dealer denies it
/// meanwhile. The dealer signs it; every holder checks that signature before it asks its
/// person to take the role, and takes a rule from no one but that dealer.
///
///     fields    = version 0x01 ‖ secret id (16) ‖ dealer card (65) ‖ trustee card (65)
///                 ‖ wait (8, seconds) ‖ issued (8, Unix seconds)
///     rule      = fields ‖ signature (64)
///     signature = Ed25519 by the dealer card's key over "vault/v1/emergency-rule" ‖ fields
///
/// A wait of 0 turns the rule off (the trustee card is then the dealer's own). `issued`
/// orders a secret's rules: a holder keeps the latest and refuses any rule not newer, so a
/// relay replaying an old rule cannot bring it back.
public struct EmergencyRule: Equatable, Sendable {
    public let secretID: [UInt8]
    public let dealer: KeyCard
    /// Who may ask; the dealer's own card when the rule is off.
    public let trustee: KeyCard
    /// Seconds each holder waits, on its own clock, from receiving the trustee's request; 0: off.
    public let wait: UInt64
    /// When the dealer made it (Unix seconds): a secret's later rule replaces an earlier one.
    public let issued: UInt64
    let signature: [UInt8]

    static let version = DealerSignedRecord.version
    /// The rule's length as it travels: 227 bytes.
    public static let length = 1 + 16 + 2 * KeyCard.encodedLength + 8 + 8 + 64
    static let domain = Array("vault/v1/emergency-rule".utf8)
    /// The shortest wait: a second, so that tests can run a whole wait (a real one is days:
    /// `vault share` warns under a day).
    public static let shortestWait: UInt64 = 1
    /// The longest wait: 90 days. Holders remember a request for as long as it waits.
    public static let longestWait: UInt64 = 90 * 86_400

    /// Whether it withdraws the secret's rule.
    public var isOff: Bool { wait == 0 }

    /// The keystore's key of the secret it is about (``BundleHeader/rowID(dealer:secretID:)``).
    public var secretRow: [UInt8] { BundleHeader.rowID(dealer: dealer, secretID: secretID) }

    /// A rule for (`identity`'s card, `secretID`) naming `trustee` after `wait` seconds
    /// (``shortestWait`` to ``longestWait``), or with `trustee` nil the rule turned off.
    public static func make(secretID: [UInt8], dealer identity: Identity, trustee: KeyCard?, wait: UInt64,
                            issued: UInt64) throws(VaultError) -> EmergencyRule {
        if let trustee {
            guard trustee != identity.card else { throw .invalidSecret("the dealer cannot name itself for emergency access") }
            guard (shortestWait...longestWait).contains(wait) else {
                throw .invalidSecret("an emergency wait is \(DurationText.text(shortestWait)) to \(DurationText.text(longestWait))")
            }
        }
        return signed(secretID: secretID, dealer: identity.card, trustee: trustee ?? identity.card, wait: trustee == nil ? 0 : wait,
                      issued: issued, by: identity)
    }

    /// A rule with these fields signed by `signer`, whoever that is: `make` signs as the
    /// dealer; tests forge rules with it.
    static func signed(secretID: [UInt8], dealer: KeyCard, trustee: KeyCard, wait: UInt64, issued: UInt64, by signer: Identity) -> EmergencyRule {
        let fields = fields(secretID: secretID, dealer: dealer, trustee: trustee, wait: wait, issued: issued)
        return EmergencyRule(secretID: secretID, dealer: dealer, trustee: trustee, wait: wait, issued: issued,
                             signature: signer.sign(domain + fields))
    }

    private init(secretID: [UInt8], dealer: KeyCard, trustee: KeyCard, wait: UInt64, issued: UInt64, signature: [UInt8]) {
        self.secretID = secretID
        self.dealer = dealer
        self.trustee = trustee
        self.wait = wait
        self.issued = issued
        self.signature = signature
    }

    private static func fields(secretID: [UInt8], dealer: KeyCard, trustee: KeyCard, wait: UInt64, issued: UInt64) -> [UInt8] {
        var w = ByteWriter()
        w.u8(version)
        w.raw(secretID)
        w.raw(dealer.encoded)
        w.raw(trustee.encoded)
        w.u64(wait)
        w.u64(issued)
        return w.bytes
    }

    /// The rule as it travels and is kept.
    public var encoded: [UInt8] { Self.fields(secretID: secretID, dealer: dealer, trustee: trustee, wait: wait, issued: issued) + signature }

    /// Parses a rule and checks what it can alone: its layout, its bounds and the dealer's
    /// signature. Whether its dealer is the share's, trusted and its sender, is the holder's
    /// check (``EmergencyDesk``).
    public init(parsing bytes: [UInt8]) throws(VaultError) {
        func fail(_ detail: String) -> VaultError { .malformed(what: "the emergency rule", detail: detail) }
        let ((secretID, dealer, trustee, wait, issued), signature) = try DealerSignedRecord.read(
            bytes, what: "the emergency rule", length: Self.length, domain: Self.domain,
            fields: { r in
                (try r.raw(16), try KeyCard(encoded: try r.raw(KeyCard.encodedLength)), try KeyCard(encoded: try r.raw(KeyCard.encodedLength)),
                 try r.u64(), try r.u64())
            }, dealer: \.1)
        guard issued <= UInt64(Int64.max) else { throw fail("its time is out of range") }
        if wait == 0 {
            guard trustee == dealer else { throw fail("a rule turned off names the dealer alone") }
        } else {
            guard trustee != dealer else { throw fail("the dealer names itself") }
            guard (Self.shortestWait...Self.longestWait).contains(wait) else { throw fail("its wait is out of range") }
        }
        self.init(secretID: secretID, dealer: dealer, trustee: trustee, wait: wait, issued: issued, signature: signature)
    }
}
