import Testing
@testable import VaultCore

/// Where results go must mean one thing to vault and to whatever opens the callback.
@Suite struct CallbackDestinationTests {
    @Test(arguments: [
        ("https://example.com/cb?x=1", "https://example.com", true),
        ("HTTPS://Example.COM:8443/", "https://example.com:8443", true),
        ("https://[::1]:7/x", "https://[::1]:7", true),
        ("webcal://calendar.example/feed", "webcal://calendar.example", true),
        ("myapp://x-callback-url/done?id=1", "myapp:", false),
        ("notes:saved", "notes:", false),
    ])
    func canonicalOrigins(callback: String, origin: String, network: Bool) throws {
        let destination = try #require(CallbackDestination(callback: callback))
        #expect(destination.description == origin && destination.isNetwork == network)
    }

    /// Each of these reads as one host to a strict parser and as another to a browser, or
    /// runs or reads something instead of handing results over: refused.
    @Test(arguments: [
        "https://evil.example\\@good.example/cb",      // a browser reads \ as /
        "https://evil.example\\.good.example/",
        "https://user:pw@good.example/",              // userinfo
        "https://good.example%5C@evil.example/",
        "https://good.example\t/", "https://good.example\n/", "https:// good.example/",
        "https://", "https:good.example", "https://good.example:0/", "https://good.example:99999/",
        "https://gööd.example/", "https://good.example:80x/",
        "javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,hi", "file:///etc/passwd", "about:blank",
        "1ab:x", ":nothing", "no-colon",
    ])
    func refusesAmbiguousOrActiveCallbacks(callback: String) {
        #expect(CallbackDestination(callback: callback) == nil)
    }

    @Test func theAllowlistTakesOnlyDestinations() throws {
        #expect(try CallbackDestination(allowing: "myapp").description == "myapp:")
        #expect(try CallbackDestination(allowing: "https://example.com/any/path").description == "https://example.com")
        #expect(try CallbackDestination(allowing: "-") == .standardOutput)
        #expect(throws: VaultError.self) { try CallbackDestination(allowing: "https://user@example.com") }
        #expect(throws: VaultError.self) { try CallbackDestination(allowing: "javascript") }
    }

    @Test func terminalTextEscapesABackslashToo() {
        // Else hostile text could imitate an escaped character.
        #expect(TerminalText.escaped("a\\u{1B}b\u{1B}") == "a\\\\u{1B}b\\u{1B}")
    }
}
