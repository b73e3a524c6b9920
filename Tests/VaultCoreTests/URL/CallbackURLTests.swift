import Foundation
import Testing
@testable import VaultCore

/// The strict `vault://x-callback-url/` parser and the callback builder.
@Suite struct CallbackURLTests {
    func parse(_ text: String) throws -> CallbackRequest { try CallbackRequest(parsing: text) }

    @Test func decodesValuesOnce() throws {
        let request = try parse("vault://x-callback-url/encrypt?plaintext=a%20b+c%26d%3De&description=&x-source=My%20App"
            + "&filename=%C3%A9t%C3%A9.txt&raw=é&b64=ab+/c=&eq=x=y")
        #expect(request.action == "encrypt")
        #expect(request["plaintext"] == "a b+c&d=e")  // + stays a plus
        #expect(request["description"] == "")
        #expect(request["x-source"] == "My App")
        #expect(request["filename"] == "été.txt")
        #expect(request["raw"] == "é")
        #expect(request["b64"] == "ab+/c=")
        #expect(request["eq"] == "x=y")
        #expect(request["missing"] == nil)
        #expect(request.parameters.map(\.name) == ["plaintext", "description", "x-source", "filename", "raw", "b64", "eq"])
        #expect(try parse("VAULT://X-CALLBACK-URL/decrypt").parameters.isEmpty)
    }

    @Test(arguments: [
        ("vault:x-callback-url/encrypt", "host"),
        ("vaults://x-callback-url/encrypt", "scheme"),
        ("vault://callback/encrypt", "host"),
        ("vault://x-callback-url/", "action"),
        ("vault://x-callback-url/en/crypt", "action"),
        ("vault://x-callback-url/encrypt?a=1&a=2", "given twice"),
        ("vault://x-callback-url/encrypt?a=%4", "percent"),
        ("vault://x-callback-url/encrypt?a=%G0", "percent"),
        ("vault://x-callback-url/encrypt?a=%", "percent"),
        ("vault://x-callback-url/encrypt?a=%FF", "percent"),
        ("vault://x-callback-url/encrypt?a=1&&b=2", "empty parameter"),
        ("vault://x-callback-url/encrypt?a", "without ="),
        ("vault://x-callback-url/encrypt?=1", "without a name"),
        ("vault://x-callback-url/encrypt?a=1#frag", "fragment"),
    ])
    func refuses(text: String, reason: String) {
        do {
            _ = try parse(text)
            Issue.record("accepted \(text)")
        } catch {
            #expect("\(error)".contains(reason), "\(error)")
        }
    }

    @Test func appendsAfterTheCallersQuery() {
        let results = [("plaintext", "a b+c&d=é"), ("description", "")]
        #expect(CallbackURL.appending(results, to: "app://done") == "app://done?plaintext=a%20b%2Bc%26d%3D%C3%A9&description=")
        #expect(CallbackURL.appending(results, to: "app://done?IACRequestID=4%2B2&x=")
            == "app://done?IACRequestID=4%2B2&x=&plaintext=a%20b%2Bc%26d%3D%C3%A9&description=")
        #expect(CallbackURL.appending([("k", "v")], to: "app://done?") == "app://done?k=v")
        #expect(CallbackURL.appending([("k", "v")], to: "app://done#top") == "app://done?k=v#top")
        #expect(CallbackURL.encode("AZaz09-._~ /+=") == "AZaz09-._~%20%2F%2B%3D")
    }

    @Test func whatIsAppendedDecodesBackExactly() throws {
        let value = String((0..<300).map { Character(Unicode.Scalar(UInt8(truncatingIfNeeded: $0 % 128 + 1))) }) + "üñï€😀"
        let callback = CallbackURL.appending([("v", value)], to: "vault://x-callback-url/check?IACRequestID=7")
        let parsed = try parse(callback)
        #expect(parsed["v"] == value && parsed["IACRequestID"] == "7")
    }
}
