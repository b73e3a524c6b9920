import Foundation
import Testing
import VaultCore
import VaultTestSupport

/// `vault url`: x-callback-url requests end to end, every error code, confirmation, the
/// allowlist, and the desktop handler.
@Suite struct URLRequestTests {
    /// Alice and Bob share the key `family`; Alice's serve has it unlocked, and results may go
    /// without a terminal to the test's callback schemes and to standard output.
    final class Setup {
        let holders: SharedKeyTests.Holders
        var alice: User { holders["alice"] }

        init(allow: Bool = true) throws {
            holders = try SharedKeyTests.Holders(["alice", "bob"], serving: ["alice", "bob"])
            try holders.ok("alice", ["key", "create", "family", "--to", "bob", "-k", "2", "--description", "home"])
            try holders.ok("alice", ["unlock", "family"])
            if allow { for destination in ["myapp:", "x:", "a:", "-"] { try alice.ok("settings", "url-allow", destination) } }
        }

        deinit { holders.stopAll() }

        /// Runs `vault url -` with the request on standard input.
        func url(_ request: String) throws -> ProcessResult {
            try alice.vault.run(["url", "-"], stdin: Array(request.utf8))
        }
    }

    static func request(_ action: String, _ parameters: [(String, String)]) -> String {
        CallbackURL.appending(parameters, to: "vault://x-callback-url/\(action)")
    }

    /// The parameters a callback URL carries, decoded.
    static func results(_ callback: String) throws -> CallbackRequest {
        let query = callback.split(separator: "?", maxSplits: 1).last.map(String.init) ?? ""
        return try CallbackRequest(parsing: "vault://x-callback-url/result?" + query)
    }

    static let success = "myapp://done?IACRequestID=42&note=a%2Bb"
    static let failure = "myapp://failed?IACRequestID=42"

    @Test func encryptsAndDecryptsTextAndFiles() throws {
        let s = try Setup()
        let text = "héllo wörld + & = ? % 😀"
        let encrypted = try s.url(Self.request("encrypt", [("plaintext", text), ("description", "a greeting"), ("key", "family"),
                                                          ("x-source", "tester"), ("x-success", Self.success), ("x-error", Self.failure)]))
        #expect(encrypted.status == 0, "\(encrypted.stderr)")
        #expect(encrypted.stdout.hasPrefix(Self.success + "&encryptedData="))
        let data = try #require(try Self.results(encrypted.stdout.trimmingCharacters(in: .newlines))["encryptedData"])
        #expect(Data(base64Encoded: data)?.prefix(4) == Data("VLTI".utf8))

        let decrypted = try s.url(Self.request("decrypt", [("encryptedData", data), ("x-source", "tester"), ("x-success", Self.success)]))
        #expect(decrypted.status == 0, "\(decrypted.stderr)")
        let back = try Self.results(decrypted.stdout.trimmingCharacters(in: .newlines))
        #expect(back["plaintext"] == text && back["description"] == "a greeting" && back["filename"] == nil)
        #expect(back["IACRequestID"] == "42" && back["note"] == "a+b")

        // A binary file, as base64, with every byte value; stored too (store=1).
        let bytes = (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let file = try s.url(Self.request("encrypt", [("plaintext", Data(bytes).base64EncodedString()), ("filename", "blob.bin"),
                                                     ("key", "family"), ("store", "1"), ("x-source", "tester"), ("x-success", Self.success)]))
        #expect(file.status == 0, "\(file.stderr)")
        let fileData = try #require(try Self.results(file.stdout.trimmingCharacters(in: .newlines))["encryptedData"])
        #expect(try s.alice.ok("item", "list").contains("file  -  \(bytes.count) B"))
        let openedRun = try s.url(Self.request("decrypt", [("encryptedData", fileData), ("x-source", "tester"), ("x-success", "x://y")]))
        let opened = try Self.results(openedRun.stdout.trimmingCharacters(in: .newlines))
        #expect(openedRun.status == 0, "\(openedRun.stderr)")
        #expect(opened["filename"] == "blob.bin" && Data(base64Encoded: opened["plaintext"] ?? "") == Data(bytes))

        // Without x-success the results are printed as a query; the URL may be an argument.
        let bare = try s.alice.vault.run(["url", Self.request("decrypt", [("encryptedData", data), ("x-source", "tester")])])
        #expect(bare.status == 0 && bare.stdout.hasPrefix("plaintext=h%C3%A9llo%20w%C3%B6rld%20%2B%20%26"), "\(bare.stderr)")
    }

    /// Every documented error code, through x-error; the exit status is 1 and the keystore
    /// stays as it was.
    @Test func reachesEveryErrorCode() throws {
        let s = try Setup()
        let first = try s.url(Self.request("encrypt", [("plaintext", "x"), ("key", "family"), ("x-source", "tester"), ("x-success", "a://b")]))
        let good = try #require(try Self.results(first.stdout.trimmingCharacters(in: .newlines))["encryptedData"], "\(first.stderr)")
        var tampered = [UInt8](try #require(Data(base64Encoded: good)))
        tampered[tampered.count - 3] ^= 1
        func code(_ action: String, _ parameters: [(String, String)], success: String = "a://ok",
                  sourceLocation: SourceLocation = #_sourceLocation) throws -> (Int, String) {
            let request = Self.request(action, parameters + [("x-source", "tester"), ("x-error", Self.failure), ("x-success", success)])
            let before = s.alice.vault.keystoreBytes()
            let result = try s.url(request)
            #expect(result.status == 1, "\(result.stdout)\(result.stderr)", sourceLocation: sourceLocation)
            #expect(s.alice.vault.keystoreBytes() == before, sourceLocation: sourceLocation)
            #expect(result.stdout.hasPrefix(Self.failure + "&errorCode="), "\(result.stdout)", sourceLocation: sourceLocation)
            #expect(result.stderr.hasPrefix("vault: error: "), sourceLocation: sourceLocation)
            let callback = try Self.results(result.stdout.trimmingCharacters(in: .newlines))
            #expect(callback["IACRequestID"] == "42", sourceLocation: sourceLocation)
            return (Int(callback["errorCode"] ?? "") ?? 0, callback["errorMessage"] ?? "")
        }
        #expect(try code("encrypt", [("key", "family")]).0 == 1)
        #expect(try code("encrypt", [("plaintext", "a$b"), ("filename", "f"), ("key", "family")]).0 == 2)
        #expect(try code("decrypt", [("encryptedData", "not base64!")]).0 == 2)
        #expect(try code("sign", [("plaintext", "x")]).0 == 3)
        #expect(try code("encrypt", [("plaintext", "x"), ("key", "nokey")]).0 == 4)
        #expect(try code("encrypt", [("plaintext", "x"), ("key", "family"), ("addPassword", "1"), ("scryptN", "1024")]).0 == 7)
        #expect(try code("encrypt", [("plaintext", "x"), ("key", "family"), ("scryptN", "32768")]).0 == 10)
        #expect(try code("decrypt", [("encryptedData", Data(tampered).base64EncodedString())]).0 == 8)
        #expect(try code("decrypt", [("encryptedData", Data("VLTI".utf8).base64EncodedString())]).0 == 8)
        let untrusted = try code("encrypt", [("plaintext", "x"), ("key", "family")], success: "stranger://ok")
        #expect(untrusted.0 == 9 && untrusted.1.contains("not on the allowlist"))
        #expect(try code("encrypt", [("plaintext", "x"), ("key", "family"), ("store", "2")]).0 == 10)
        #expect(try code("encrypt", [("plaintext", "x"), ("key", "family"), ("addPassword", "1")]).0 == 11)
        // Even an allowlisted destination gets nothing from a locked key.
        try s.alice.ok("lock")
        let locked = try code("decrypt", [("encryptedData", good)])
        #expect(locked.0 == 5 && locked.1.contains("vault unlock"))
        // A key of which this keystore holds no share.
        let dave = try User().initialize("dave")
        try dave.ok("settings", "url-allow", "-")
        let foreign = try dave.vault.run(["url", "-"], stdin: Array(Self.request("decrypt", [("encryptedData", good), ("x-source", "tester"),
                                                                                          ("x-error", Self.failure)]).utf8))
        #expect(foreign.status == 1 && foreign.stdout.contains("errorCode=4&"), "\(foreign.stdout)")
    }

    @Test func code12WhenTheKeystoreCannotBeWritten() throws {
        guard getuid() == 0 else { return }  // mounting a small tmpfs needs root, as CI has
        let s = try Setup()
        // Dave's keystore sits on a 1 MiB tmpfs; storing a larger item fills it.
        let mount = TemporaryDirectory("vault-full")
        #expect(try ProcessRunner.run("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", mount.path]).status == 0)
        defer { _ = try? ProcessRunner.run("/usr/bin/umount", [mount.path]) }
        let dave = User()
        dave.vault = VaultBinary(home: mount.file("home"))
        try dave.initialize("dave")
        try dave.ok("peer", "add", try s.alice.card(), "--label", "alice", "--yes")
        try s.alice.ok("peer", "add", try dave.card(), "--label", "dave", "--yes")
        try s.alice.ok("secrets", "auto-release", "--for", "dave")
        let key = try s.alice.ok("share", "--type", "key", "--to", "dave", "-k", "2", "--out-dir", mount.path)
        try dave.ok("secrets", "import", "--yes", mount.file("dave.vshare"))
        try dave.ok("secrets", "rename", String(key.prefix(8)), "small")
        try dave.ok("settings", "url-allow", "-")
        let serve = try dave.vault.background(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"], log: s.holders.circle.files.file("dave.log"))
        defer { serve.stop() }
        try serve.waitFor("agent listening")
        try dave.ok("unlock", "small", "--peer", "alice=\(s.holders.servers["alice"]!.address)")
        let big = Data((0..<1_500_000).map { UInt8(truncatingIfNeeded: $0) }).base64EncodedString()
        let result = try dave.vault.run(["url", "-"], stdin: Array(Self.request("encrypt", [
            ("plaintext", big), ("filename", "big.bin"), ("key", "small"), ("store", "1"), ("x-source", "tester"), ("x-error", Self.failure),
        ]).utf8))
        #expect(result.status == 1)
        #expect(result.stdout.contains("errorCode=12&") && result.stderr.contains("disk is full"), "\(result.stdout)\(result.stderr)")
        // Nothing half-stored, and the keystore still works.
        let left = try JSONSerialization.jsonObject(with: Data(try dave.ok("item", "list", "--json").utf8)) as! [Any]
        #expect(left.isEmpty)
    }

    @Test func confirmsOnTheTerminalAndHonoursTheAllowlist() throws {
        let s = try Setup(allow: false)
        let request = Self.request("encrypt", [("plaintext", "hi"), ("key", "family"), ("x-source", "editor"),
                                               ("x-success", "a://ok"), ("x-cancel", "a://cancelled?id=1"), ("x-error", Self.failure)])
        // No terminal and not allowlisted: confirmation required (code 9).
        #expect(try s.url(request).stdout.contains("errorCode=9"))
        // On a terminal the person sees who asks and with which key, and may decline.
        let declined = try s.alice.vault.interactive("url", request)
        try declined.expect("Allow this request (results to a:)? [y/N] ")
        declined.send("n")
        let no = declined.finish()
        #expect(no.status == 2 && no.stdout == "a://cancelled?id=1\n")
        #expect(no.stderr.contains("from         editor") && no.stderr.contains("key          family"))
        // Without x-cancel, a refusal goes to x-error with code 6.
        let noCancel = Self.request("encrypt", [("plaintext", "hi"), ("key", "family"), ("x-source", "editor"), ("x-error", Self.failure)])
        let declined2 = try s.alice.vault.interactive("url", noCancel)
        try declined2.expect("[y/N] ")
        declined2.send("n")
        let no2 = declined2.finish()
        #expect(no2.status == 2 && no2.stdout.hasPrefix(Self.failure + "&errorCode=6&"), "\(no2.stdout)")
        let accepted = try s.alice.vault.interactive("url", request)
        try accepted.expect("[y/N] ")
        accepted.send("y")
        let yes = accepted.finish()
        #expect(yes.status == 0 && yes.stdout.hasPrefix("a://ok?encryptedData="), "\(yes.stderr)")
        // The allowlist lets the destination in without a terminal, until it is taken off.
        try s.alice.ok("settings", "url-allow", "a")
        #expect(try s.alice.ok("settings").contains("url-allow  a:"))
        #expect(try s.url(request).status == 0)
        try s.alice.ok("settings", "url-deny", "a:")
        #expect(try s.url(request).stdout.contains("errorCode=9"))
    }

    /// Examples/url-client.sh, as a user would run it.
    @Test func exampleClientRoundTrips() throws {
        let s = try Setup()
        try s.alice.ok("settings", "url-allow", "url-client:")
        var environment = s.alice.vault.childEnvironment
        environment["VAULT"] = VaultBinary.path
        let script = ForeignNoiseTests.root.appendingPathComponent("Examples/url-client.sh").path
        let result = try ProcessRunner.run("/bin/bash", [script, "family"], environment: environment)
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("url-client: round trip ok"))
    }

    @Test func refusesMalformedRequestsWithoutACallback() throws {
        let s = try Setup()
        for bad in ["vault://x-callback-url/encrypt?plaintext=a&plaintext=b&x-error=a%3A%2F%2Fe",
                    "vault://x-callback-url/encrypt?plaintext=%ZZ&x-error=a%3A%2F%2Fe",
                    "http://x-callback-url/encrypt?plaintext=a"] {
            let message = try s.alice.fails(["url", bad])
            #expect(message.contains("given twice") || message.contains("percent-encoding") || message.contains("scheme"), "\(message)")
        }
    }

    @Test func opensOrExplainsWhyNot() throws {
        let s = try Setup()
        let request = Self.request("encrypt", [("plaintext", "x"), ("key", "family"), ("x-source", "tester"), ("x-success", "a://ok")])
        let result = try ProcessRunner.run(VaultBinary.path, ["url", "--open", request],
                                           environment: s.alice.vault.childEnvironment.filter { $0.key != "DISPLAY" && $0.key != "WAYLAND_DISPLAY" })
        #expect(result.status == 0)
        #expect(result.stderr.contains("vault: warning: cannot open the callback") && result.stdout.hasPrefix("a://ok?encryptedData="))
    }

    @Test func installsAndUninstallsTheDesktopHandler() throws {
        let home = TemporaryDirectory("vault-desktop")
        let user = User()
        user.vault = VaultBinary(home: user.directory.file("home"), environment: ["HOME": home.path, "XDG_DATA_HOME": "", "XDG_CONFIG_HOME": ""])
        let environment = user.vault.childEnvironment
        func query() throws -> String {
            try ProcessRunner.run("/usr/bin/xdg-mime", ["query", "default", "x-scheme-handler/vault"], environment: environment)
                .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try query() == "")
        let installed = try user.vault.run(["url", "--install-handler"])
        #expect(installed.status == 0 && installed.stderr.contains("xdg-mime query default x-scheme-handler/vault"), "\(installed.stderr)")
        #expect(try query() == "vault-url.desktop")
        let entry = try String(contentsOfFile: home.file(".local/share/applications/vault-url.desktop"), encoding: .utf8)
        #expect(entry.contains("Exec=\(URL(fileURLWithPath: VaultBinary.path).resolvingSymlinksInPath().path) url --open %u"))
        #expect(entry.contains("MimeType=x-scheme-handler/vault;") && entry.contains("NoDisplay=true"))
        let removed = try user.vault.run(["url", "--uninstall-handler"])
        #expect(removed.status == 0 && removed.stderr.contains("removed"))
        #expect(try query() == "")
        #expect(!FileManager.default.fileExists(atPath: home.file(".local/share/applications/vault-url.desktop")))
    }
}
