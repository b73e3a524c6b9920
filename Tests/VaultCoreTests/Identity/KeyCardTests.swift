import Testing
@testable import VaultCore
import VaultTestSupport

@Suite struct KeyCardTests {
    /// Keys from fixed secrets; the expected text and fingerprint were computed independently
    /// with PyNaCl, hashlib's BLAKE2b and the BIP 173 reference algorithm.
    static let vectorText =
        "vault1qyr6xl9uzssf8j9h2hwpky8gdj6zvd626942s5ldp00upv4cd5w8eel3v2sshmz4ntl2r90ymn5yk62k34wjevyk866ydsrgtc430uhsulqg5n"

    static func vectorIdentity() throws -> Identity {
        try Identity(label: Label("vector"), card: nil, secret: SecureBytes(copying: (1...64).map { UInt8($0) }))
    }

    @Test func matchesIndependentVector() throws {
        let card = try Self.vectorIdentity().card
        #expect(card.text == Self.vectorText)
        #expect(card.fingerprint == "84393 83918 80882 51423 87465 20872")
        #expect(card.agreementKey == hexBytes("07a37cbc142093c8b755dc1b10e86cb426374ad16aa853ed0bdfc0b2b86d1c7c"))
        #expect(card.signingKey == hexBytes("e7f162a10bec559afea195e4dce84b69568d5d2cb0963eb446c0685e2b17f2f0"))
        #expect(try KeyCard(text: Self.vectorText) == card)
        #expect(card.text.count == 116)
    }

    @Test func parsesUppercaseAndSurroundingSpace() throws {
        let card = try KeyCard(text: Self.vectorText)
        #expect(try KeyCard(text: Self.vectorText.uppercased()) == card)
        #expect(try KeyCard(text: "  \(Self.vectorText)\n") == card)
        #expect(try KeyCard(encoded: card.encoded) == card)
    }

    static func encode(_ bytes: [UInt8], hrp: String = "vault") -> String {
        Bech32.encode(hrp: hrp, data: bytes)
    }

    @Test func refusesEachDefect() throws {
        let good = try KeyCard(text: Self.vectorText).encoded
        func defect(_ text: String) -> CardDefect? {
            do {
                _ = try KeyCard(text: text)
                return nil
            } catch {
                guard case .invalidCard(let defect) = error else { return nil }
                return defect
            }
        }
        #expect(defect(Self.encode(good, hrp: "age")) == .wrongPrefix("age"))
        #expect(defect(Self.encode([2] + good.dropFirst())) == .unknownVersion(2))
        #expect(defect(Self.encode(Array(good.dropLast()))) == .wrongLength(64))
        #expect(defect(Self.encode(good + [0])) == .wrongLength(66))
        #expect(defect(Self.encode([])) == .wrongLength(0))
        // One mistyped character.
        var typo = Array(Self.vectorText)
        typo[40] = typo[40] == "q" ? "p" : "q"
        #expect(defect(String(typo)) == .badChecksum)
        // One character lost.
        var lost = Self.vectorText
        lost.remove(at: lost.index(lost.startIndex, offsetBy: 50))
        #expect(defect(lost) == .badChecksum)
        #expect(defect("VAULT1" + Self.vectorText.dropFirst(6)) == .mixedCase)
        #expect(defect(Self.vectorText.replacingOccurrences(of: "q", with: "b")) == .invalidCharacter)
        #expect(defect("vaultqqqq") == .missingSeparator)
        #expect(defect("") == .missingSeparator)
        #expect(defect(String(repeating: "q", count: 2000)) == .tooLong)
    }

    /// Each is refused every time, also after a card sharing its other key was read (and
    /// its keys remembered as usable, CheckedKeys): the whole card is what was checked.
    @Test func refusesUnusableKeys() throws {
        let good = try KeyCard(text: Self.vectorText)
        // The all-zero X25519 key and a low-order Ed25519 point.
        let zeroAgreement = [KeyCard.version] + [UInt8](repeating: 0, count: 32)
            + hexBytes("e7f162a10bec559afea195e4dce84b69568d5d2cb0963eb446c0685e2b17f2f0")
        let identityPoint = [UInt8](repeating: 0, count: 1) + [UInt8](repeating: 0, count: 31)
        var lowOrder = identityPoint
        lowOrder[0] = 1
        let badSigning = [KeyCard.version]
            + hexBytes("07a37cbc142093c8b755dc1b10e86cb426374ad16aa853ed0bdfc0b2b86d1c7c") + lowOrder
        for _ in 1...2 {
            #expect(throws: VaultError.invalidCard(.invalidKey)) { try KeyCard(encoded: zeroAgreement) }
            #expect(throws: VaultError.invalidCard(.invalidKey)) { try KeyCard(encoded: badSigning) }
        }
        // Never kept as usable. (Whether the good card still is depends on the other tests
        // running at once: past 4,096 keys the set starts again.)
        #expect(!CheckedKeys.contains(zeroAgreement) && !CheckedKeys.contains(badSigning))
        #expect(try KeyCard(encoded: good.encoded) == good)
    }

    @Test func offerCarriesAnOptionalLabel() throws {
        let card = try KeyCard(text: Self.vectorText)
        let offer = try CardOffer(text: Self.vectorText.uppercased() + "#Ana's phone")
        #expect(offer.card == card && offer.suggestedLabel?.value == "Ana's phone")
        #expect(try CardOffer(text: offer.qrPayload).suggestedLabel == offer.suggestedLabel)
        #expect(offer.qrPayload.hasPrefix("VAULT1"))
        #expect(try CardOffer(text: Self.vectorText).suggestedLabel == nil)
        #expect(throws: VaultError.invalidCard(.badLabel)) { try CardOffer(text: Self.vectorText + "#") }
        #expect(throws: VaultError.invalidCard(.badLabel)) { try CardOffer(text: Self.vectorText + "#a,b") }
    }

    @Test func fingerprintsDiffer() throws {
        let a = try Self.vectorIdentity().card
        let b = try Identity(label: Label("b"), card: nil, secret: SecureBytes(copying: [UInt8](repeating: 9, count: 64))).card
        #expect(a.fingerprint != b.fingerprint)
        #expect(a.fingerprint.split(separator: " ").map(\.count) == [5, 5, 5, 5, 5, 5])
    }

    @Test func signaturesVerifyOnlyUnderTheirCard() throws {
        let identity = try Self.vectorIdentity()
        let signature = identity.sign(Array("message".utf8))
        #expect(identity.card.verify(signature: signature, of: Array("message".utf8)))
        #expect(!identity.card.verify(signature: signature, of: Array("messagf".utf8)))
        #expect(!identity.card.verify(signature: Array(signature.dropLast()), of: Array("message".utf8)))
    }
}
