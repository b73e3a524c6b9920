import Foundation
import Testing
import VaultCore
import VaultRelayProtocol

/// Base64url and hex, written without Foundation for speed (a relay decodes four headers
/// and writes two ids a listed message): the same text as Foundation's base64, one spelling
/// per value, and hex as `%02x` wrote it.
@Suite struct Base64URLTests {
    @Test func roundTripsAsFoundationSpellsIt() {
        for length in 0...100 {
            let bytes = SecureRandom().bytes(length)
            let foundation = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == foundation, "length \(length)")
            #expect(Base64URL.decode(foundation) == bytes, "length \(length)")
            #expect(Base64URL.decode(foundation, length: length) == bytes)
            #expect(Base64URL.decode(foundation, length: length + 1) == nil)
            #expect(bytes.hex == bytes.map { String(format: "%02x", $0) }.joined())
            if length == 16 { #expect([UInt8](hexID: bytes.hex) == bytes) }
        }
    }

    @Test func refusesEveryOtherSpelling() {
        let key = Base64URL.encode(SecureRandom().bytes(32))
        for text in [key + "=", String(key.dropLast()), "a+b/" + key.dropFirst(4), key + "A", "A", "AB=", "A B", "AQ", "AR"] {
            let decoded = Base64URL.decode(text)
            // "AQ" is one byte (1); "AR" spells it with a bit past its end set.
            #expect(text == "AQ" ? decoded == [1] : decoded.map { $0.count != 32 || Base64URL.encode($0) != text } ?? true, "\(text)")
        }
        #expect(Base64URL.decode("AR") == nil)
        #expect([UInt8](hexID: String(repeating: "A", count: 32)) == nil)
        #expect([UInt8](hexID: String(repeating: "0", count: 31) + "g") == nil)
    }
}
