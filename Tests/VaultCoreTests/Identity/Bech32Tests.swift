import Testing
@testable import VaultCore

@Suite struct Bech32Tests {
    // Valid strings from BIP 173.
    @Test(arguments: [
        "A12UEL5L", "a12uel5l",
        "an83characterlonghumanreadablepartthatcontainsthenumber1andtheexcludedcharactersbio1tt5tgs",
        "abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw",
        "split1checkupstagehandshakeupstreamerranterredcaperred2y9e3w",
    ])
    func acceptsBIP173Checksums(text: String) throws {
        // Some of these carry data with non-zero padding, so only the checksum is asserted.
        do {
            _ = try Bech32.decode(text)
        } catch let failure {
            #expect(failure == .nonCanonicalPadding)
        }
    }

    // Invalid strings from BIP 173, with the failure each must give.
    @Test(arguments: [
        ("pzry9x0s0muk", Bech32.Failure.missingSeparator),
        ("1pzry9x0s0muk", .missingSeparator),
        ("x1b4n0q5v", .invalidCharacter),
        ("li1dgmt3", .missingSeparator),
        ("A1G7SGD8", .badChecksum),
        ("10a06t8", .missingSeparator),
        ("1qzzfhee", .missingSeparator),
        ("a12UEL5L", .mixedCase),
        ("a1 2uel5l", .invalidCharacter),
    ])
    func refusesBIP173Invalid(text: String, failure: Bech32.Failure) {
        #expect(throws: failure) { try Bech32.decode(text) }
    }

    @Test func roundTripsEveryLength() throws {
        let random = SecureRandom()
        for length in 0..<100 {
            let data = random.bytes(length)
            let text = Bech32.encode(hrp: "vault", data: data)
            let decoded = try Bech32.decode(text)
            #expect(decoded.hrp == "vault" && decoded.data == data)
            let upper = try Bech32.decode(text.uppercased())
            #expect(upper.data == data)
        }
    }

    @Test func hasNoNinetyCharacterLimitButABound() throws {
        let long = Bech32.encode(hrp: "vault", data: [UInt8](repeating: 7, count: 500))
        #expect(long.count > 90)
        #expect(try Bech32.decode(long).data.count == 500)
        let tooLong = Bech32.encode(hrp: "vault", data: [UInt8](repeating: 7, count: 700))
        #expect(throws: Bech32.Failure.tooLong) { try Bech32.decode(tooLong) }
    }

    @Test func refusesNonZeroPadding() throws {
        // One byte is 8 bits: two 5-bit groups carry 2 bits of padding. Set them, fix the
        // checksum, and the decoder must refuse the non-canonical form.
        let canonical = Bech32.encode(hrp: "vault", data: [0xFF])
        let values = try #require(canonical.split(separator: "1").last).dropLast(6)
        let alphabet = Array("qpzry9x8gf2tvdw0s3jn54khce6mua7l")
        var groups = values.map { alphabet.firstIndex(of: $0)! }
        groups[groups.count - 1] |= 1
        let forged = Bech32.encodeValues(hrp: "vault", values: groups.map(UInt8.init))
        #expect(throws: Bech32.Failure.nonCanonicalPadding) { try Bech32.decode(forged) }
    }
}
