import Testing
@testable import VaultCore

@Suite struct LabelTests {
    @Test(arguments: ["alice", "bob@laptop", "Ana's phone", "Zoë", "東京", "a.b_c-d+e", "x"])
    func accepts(text: String) throws {
        #expect(try Label(text).value == text.precomposedStringWithCanonicalMapping)
    }

    @Test(arguments: ["", " alice", "alice ", ".hidden", "-flag", "a,b", "a=b", "a#b", "a/b", "a\\b",
                      "tab\there", "new\nline", "nul\u{0}", String(repeating: "a", count: 65)])
    func refuses(text: String) {
        #expect(throws: VaultError.self) { try Label(text) }
    }

    /// Finding 11: 64 four-byte characters are 256 UTF-8 bytes, one more than a label's
    /// 1-byte length field in a bundle header holds (`share --labels` trapped on them).
    @Test func refusesLabelsLongerThanTheirLengthField() throws {
        let wide = "\u{20000}"
        #expect(throws: VaultError.invalidLabel(String(repeating: wide, count: 64), reason: "it is longer than 255 bytes in UTF-8")) {
            try Label(String(repeating: wide, count: 64))
        }
        #expect(try Label(String(repeating: wide, count: 63) + "東").value.utf8.count == 255)
        #expect(Label.sanitized(String(repeating: wide, count: 64)).value.utf8.count == 252)
    }

    @Test func comparesWithoutCase() throws {
        #expect(try Label("Alice").key == Label("alice").key)
        #expect(try Label("Ǆ").key == Label("ǆ").key)
    }

    @Test func normalisesToNFC() throws {
        // "é" as e + combining acute, and precomposed.
        #expect(try Label("e\u{301}") == Label("\u{e9}"))
    }

    @Test func sanitisesMachineNames() {
        #expect(Label.sanitized("root@my host").value == "root@my-host")
        #expect(Label.sanitized("..x").value == "x")
        #expect(Label.sanitized("///").value == "vault")
        #expect((try? Label(Label.machineDefault().value)) != nil)
    }
}

@Suite struct PeerAddressTests {
    @Test(arguments: [("127.0.0.1:7733", "127.0.0.1", 7733), ("host.local:1", "host.local", 1),
                      ("[::1]:65535", "::1", 65535), ("[fe80::1]:80", "fe80::1", 80)])
    func parses(text: String, host: String, port: Int) throws {
        let address = try PeerAddress(text)
        #expect(address.host == host && Int(address.port) == port)
        #expect(address.description == text)
    }

    @Test(arguments: ["host", "host:", ":7733", "host:0", "host:65536", "host:-1", "host:+80", "::1:80",
                      "[::1]", "[::1]80", "[zz]:80", "ho st:80", "hôst:80", "host:٣"])
    func refuses(text: String) {
        #expect(throws: VaultError.self) { try PeerAddress(text) }
    }
}
