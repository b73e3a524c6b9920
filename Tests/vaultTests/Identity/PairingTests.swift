import Foundation
import Testing
import VaultTestSupport

/// Pairing by short code between `vault serve --pairing` and `vault pair`, each on its own
/// pseudo-terminal, as two people at two machines.
@Suite struct PairingTests {
    /// Runs `vault ARGS` on a terminal with stderr to `log` (the code and details go there).
    func onTerminal(_ user: User, _ arguments: String, log: String) throws -> TerminalSession {
        try TerminalSession("/bin/sh", ["-c", "exec \"$0\" \(arguments) 2>\"\(log)\"", VaultBinary.path],
                            environment: user.vault.childEnvironment)
    }

    func waitFor(_ pattern: String, in path: String, timeout: Double = 20) throws -> String {
        let regex = try NSRegularExpression(pattern: pattern)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            if let match = regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) {
                return String(text[Range(match.range(at: match.numberOfRanges > 1 ? 1 : 0), in: text)!])
            }
            usleep(20_000)
        }
        throw NSError(domain: "PairingTests", code: 1, userInfo: [NSLocalizedDescriptionKey: "no \(pattern) in \(path)"])
    }

    func start(_ bob: User) throws -> (TerminalSession, String, String) {
        let log = bob.directory.file("serve.log")
        let serve = try onTerminal(bob, "serve --listen 127.0.0.1 --port 0 --no-mdns --pairing --pairing-window 60", log: log)
        let port = try waitFor("listening on 127\\.0\\.0\\.1:(\\d+)", in: log)
        return (serve, "127.0.0.1:\(port)", log)
    }

    @Test func bothConfirmAndEachTrustsTheOther() throws {
        let alice = try User().initialize("alice"), bob = try User().initialize("bob")
        let (serve, address, serveLog) = try start(bob)
        let pairLog = alice.directory.file("pair.log")
        let pair = try onTerminal(alice, "pair --peer \(address)", log: pairLog)
        try pair.expect("Trust 'bob'? [y/N] ")
        try serve.expect("Trust 'alice'? [y/N] ")
        // The same code on both screens.
        let aliceSees = try waitFor("pairing code  (\\d{4} \\d{4})", in: pairLog)
        let bobSees = try waitFor("pairing code  (\\d{4} \\d{4})", in: serveLog)
        #expect(aliceSees == bobSees)
        pair.send("y")
        serve.send("y")
        #expect(pair.finish().status == 0)
        _ = try waitFor("paired with 'alice'", in: serveLog)
        #expect(try alice.ok("peer", "show", "bob").contains("address      \(address)"))
        #expect(try bob.ok("peer", "show", "alice").contains(alice.card()))
        #expect(try alice.ok("peer", "show", "bob").contains(bob.card()))
        _ = serve
    }

    @Test func oneRefusalStoresNothingOnEitherSide() throws {
        let alice = try User().initialize("alice"), bob = try User().initialize("bob")
        let (serve, address, serveLog) = try start(bob)
        let pairLog = alice.directory.file("pair.log")
        let pair = try onTerminal(alice, "pair --peer \(address)", log: pairLog)
        try pair.expect("[y/N] ")
        try serve.expect("[y/N] ")
        pair.send("y")
        serve.send("n")   // the codes did not match on Bob's screen
        #expect(pair.finish().status == 1)
        #expect(try String(contentsOfFile: pairLog, encoding: .utf8).contains("pairing declined (the other side declined)"))
        _ = try waitFor("did not pair with 'alice'", in: serveLog)
        #expect(try isEmptyJSONList(alice.ok("peer", "list", "--json")))
        #expect(try isEmptyJSONList(bob.ok("peer", "list", "--json")))
    }

    @Test func refusedWhenNotPairingOrWithoutATerminal() throws {
        let alice = try User().initialize("alice"), bob = try User().initialize("bob")
        let server = try bob.vault.background(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"], log: bob.directory.file("s.log"))
        let port = try server.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)")
        let pairLog = alice.directory.file("pair.log")
        let pair = try onTerminal(alice, "pair --peer 127.0.0.1:\(port)", log: pairLog)
        #expect(pair.finish().status == 1)
        #expect(try String(contentsOfFile: pairLog, encoding: .utf8).contains("not accepting pairing (run 'vault serve --pairing' there)"))
        server.stop()
        #expect(try alice.fails("pair", "--peer", "127.0.0.1:\(port)").contains("pairing needs confirmation and there is no terminal"))
        #expect(try bob.fails("serve", "--pairing").contains("pairing needs confirmation"))
    }
}
