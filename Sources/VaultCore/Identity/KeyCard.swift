import Foundation

import CSodium

/// A machine's public key card: what two people exchange face to face.
///
/// Binary form (65 bytes): version `0x01`, the X25519 public key (32), the Ed25519 public
/// key (32). Text form: Bech32 with the human-readable part `vault`, lowercase
/// (`vault1…`, 116 characters). Docs/FORMAT.md specifies both.
public struct KeyCard: Hashable, Sendable {
    /// The only version this build reads and writes.
    public static let version: UInt8 = 1
    static let humanReadablePart = "vault"
    /// The binary card's length: 65 bytes.
    public static let encodedLength = 65

    /// X25519 public key, for key agreement (`crypto_box`, Noise).
    public let agreementKey: [UInt8]
    /// Ed25519 public key, for signatures.
    public let signingKey: [UInt8]

    init(agreementKey: [UInt8], signingKey: [UInt8]) {
        precondition(agreementKey.count == 32 && signingKey.count == 32)
        self.agreementKey = agreementKey
        self.signingKey = signingKey
    }

    /// The 65-byte binary form.
    public var encoded: [UInt8] { [Self.version] + agreementKey + signingKey }

    /// The text form, `vault1…`, lowercase.
    public var text: String { Bech32.encode(hrp: Self.humanReadablePart, data: encoded) }

    /// Whether `text` is meant as a card (it begins `vault1`, in either case), valid or not:
    /// where a card or a peer's label is taken, what is not one names a peer.
    public static func isCardText(_ text: String) -> Bool {
        text.trimmingCharacters(in: .whitespacesAndNewlines).lowercased().hasPrefix(humanReadablePart + "1")
    }

    /// Parses the text form, in either case, ignoring surrounding white space.
    public init(text: String) throws(VaultError) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        let decoded: (hrp: String, data: [UInt8])
        do {
            decoded = try Bech32.decode(trimmed)
        } catch {
            throw .invalidCard(CardDefect(error))
        }
        guard decoded.hrp == Self.humanReadablePart else {
            throw .invalidCard(.wrongPrefix(decoded.hrp))
        }
        try self.init(encoded: decoded.data)
    }

    /// Parses the binary form.
    public init(encoded bytes: [UInt8]) throws(VaultError) {
        guard let version = bytes.first else { throw .invalidCard(.wrongLength(0)) }
        // The version is checked before the length: a newer card may be longer, and
        // "unknown version" tells the user to upgrade where "wrong length" would not.
        guard version == Self.version else { throw .invalidCard(.unknownVersion(version)) }
        guard bytes.count == Self.encodedLength else { throw .invalidCard(.wrongLength(bytes.count)) }
        let agreement = Array(bytes[1..<33]), signing = Array(bytes[33..<65])
        if !CheckedKeys.contains(bytes) {
            guard Self.isUsableAgreementKey(agreement), Self.isUsableSigningKey(signing) else {
                throw .invalidCard(.invalidKey)
            }
            CheckedKeys.insert(bytes)
        }
        self.init(agreementKey: agreement, signingKey: signing)
    }

    /// The fingerprint people read aloud to each other: six groups of five digits
    /// (about 100 bits) from BLAKE2b over the binary card, as Signal's safety numbers do.
    public var fingerprint: String {
        let hash = Sodium.blake2b(outputLength: 30, key: "vault/v1/fingerprint", encoded)
        return stride(from: 0, to: 30, by: 5).map { offset in
            let chunk = hash[offset..<offset + 5].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let digits = String(chunk % 100_000)
            return String(repeating: "0", count: 5 - digits.count) + digits
        }.joined(separator: " ")
    }

    /// A short fingerprint for machines to compare: 16 hex digits (64 bits) of the same hash,
    /// as carried in mDNS TXT records (`fp=`).
    public var shortFingerprint: String {
        Sodium.blake2b(outputLength: 30, key: "vault/v1/fingerprint", encoded).prefix(8).hex
    }

    /// An X25519 key whose product with a random scalar is zero has small order: every
    /// shared secret with it is predictable, so it is refused up front.
    package static func isUsableAgreementKey(_ key: [UInt8]) -> Bool {
        let scalar = SecureRandom().secureBytes(32)
        var product = [UInt8](repeating: 0, count: 32)
        let status = scalar.withUnsafeBytes { s in
            crypto_scalarmult(&product, s.bindMemory(to: UInt8.self).baseAddress!, key)
        }
        defer { sodium_memzero(&product, 32) }
        return status == 0
    }

    /// Ed25519 keys must be canonical points of the main subgroup.
    private static func isUsableSigningKey(_ key: [UInt8]) -> Bool {
        Sodium.ready
        return crypto_core_ed25519_is_valid_point(key) == 1
    }
}

/// What a key card scanned from a QR code carries: the card and the label its owner
/// suggests. The QR payload is the card in uppercase (QR's compact alphanumeric mode),
/// optionally followed by `#` and the label.
public struct CardOffer: Sendable {
    /// The card.
    public let card: KeyCard
    /// The label suggested by the card's owner, if any. The importer may choose another.
    public let suggestedLabel: Label?

    /// Wraps a card and an optional label.
    public init(card: KeyCard, suggestedLabel: Label?) {
        self.card = card
        self.suggestedLabel = suggestedLabel
    }

    /// Parses `vault1…` or `VAULT1…`, optionally followed by `#label`.
    public init(text: String) throws(VaultError) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if let hash = trimmed.firstIndex(of: "#") {
            card = try KeyCard(text: String(trimmed[..<hash]))
            let label = String(trimmed[trimmed.index(after: hash)...])
            do {
                suggestedLabel = try Label(label)
            } catch {
                throw .invalidCard(.badLabel)
            }
        } else {
            card = try KeyCard(text: trimmed)
            suggestedLabel = nil
        }
    }

    /// The text to give someone: `vault1…#label`, what `vault peer add` takes.
    public var text: String {
        card.text + (suggestedLabel.map { "#" + $0.value } ?? "")
    }

    /// The payload for a QR code.
    public var qrPayload: String {
        card.text.uppercased() + (suggestedLabel.map { "#" + $0.value } ?? "")
    }
}
