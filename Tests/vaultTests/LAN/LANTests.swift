import Foundation
import Testing
import VaultTestSupport

/// Share and recover between `vault serve` processes on loopback.
@Suite struct LANTests {
    /// Starts `vault serve` for `label` on a free loopback port; returns it and its address.
    func serve(_ circle: Circle, _ label: String, _ extra: [String] = []) throws -> (BackgroundProcess, String) {
        let process = try circle[label].vault.background(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"] + extra,
                                                         log: circle.files.file("\(label)-\(UUID().uuidString).log"))
        let port = try process.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)")
        return (process, "127.0.0.1:\(port)")
    }

    @Test func sharesAndRecoversOverLoopback() throws {
        let circle = try Circle(["alice", "bob", "carol", "dave"])
        var servers: [String: (BackgroundProcess, String)] = [:]
        for label in ["bob", "carol", "dave"] { servers[label] = try serve(circle, label) }
        let reach = servers.flatMap { ["--peer", "\($0.key)=\($0.value.1)"] }
        let shared = try circle["alice"].vault.run(["share", "-", "--to", "bob,carol,dave", "-k", "3"] + reach,
                                                   stdin: Array("over the wire\n".utf8))
        #expect(shared.status == 0, "\(shared.stderr)")
        for label in ["bob", "carol", "dave"] {
            #expect(shared.stderr.contains("\(label): delivered to \(servers[label]!.1)"))
            try servers[label]!.0.waitFor("stored share \\d of ")
        }
        let id = shared.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let fromBob = ["carol", "dave"].flatMap { ["--peer", "\($0)=\(servers[$0]!.1)"] } + ["--peer", "alice=127.0.0.1:1"]
        let recovered = try circle["bob"].vault.run(["recover", id] + fromBob)
        #expect(recovered.status == 0, "\(recovered.stderr)")
        #expect(recovered.stdout == "over the wire\n")
        // Alice is refused at once, though recovery may stop before hearing so: carol and dave suffice.
        #expect(recovered.stderr.contains("alice: unreachable: 127.0.0.1:1: connection refused")
                || recovered.stderr.contains("not waiting for 1 more"), "\(recovered.stderr)")
        #expect(try servers["carol"]!.0.waitFor("released piece (3) of") == "3")

        // Fewer than k holders up: a clear failure naming what is missing.
        #expect(servers["dave"]!.0.stop() == 0)
        #expect(servers["dave"]!.0.log.contains("vault serve: stopped"))
        let short = try circle["bob"].fails(["recover", id] + fromBob)
        #expect(short.contains("dave: unreachable"))
        #expect(short.contains("only 2 verified pieces, 3 needed; missing: alice (index 1), dave (index 4)"), "\(short)")
        for (process, _) in servers.values { process.stop() }
    }

    /// A holder that accepts the connection and then says nothing costs recovery nothing
    /// once enough other pieces check out: it does not wait out its timeout.
    @Test func aStalledHolderDoesNotHoldUpRecovery() throws {
        let circle = try Circle(["alice", "bob", "carol"])
        let note = try circle.files.write("note.txt", Array("no waiting".utf8))
        let id = try circle.share(from: "alice", [note, "--to", "bob,carol", "-k", "2"])
        let (bob, address) = try serve(circle, "bob")
        // Carol's address: a socket that listens and never accepts; the kernel completes the
        // TCP handshake, and nothing more ever comes.
        let stalled = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(stalled) }
        var local = sockaddr_in(sin_family: sa_family_t(AF_INET), sin_port: 0, sin_addr: in_addr(s_addr: inet_addr("127.0.0.1")),
                                sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        #expect(withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(stalled, $0, length) } } == 0)
        #expect(listen(stalled, 4) == 0)
        #expect(withUnsafeMutablePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(stalled, $0, &length) } } == 0)
        let carol = "127.0.0.1:\(UInt16(bigEndian: local.sin_port))"

        let start = Date()
        let recovered = try circle["alice"].vault.run(["recover", id, "--peer", "bob=\(address)", "--peer", "carol=\(carol)",
                                                       "--timeout", "60"])
        #expect(recovered.status == 0, "\(recovered.stderr)")
        #expect(recovered.stdout == "no waiting")
        #expect(recovered.stderr.contains("enough pieces check out; not waiting for 1 more"), "\(recovered.stderr)")
        #expect(Date().timeIntervalSince(start) < 50, "recovery waited for the stalled holder (60 s)")
        bob.stop()
    }

    /// A server on loopback only never announces itself on the network.
    @Test func loopbackServersDoNotAnnounce() throws {
        let bob = try User().initialize("bob")
        let server = try bob.vault.background(["serve", "--listen", "127.0.0.1", "--port", "0"], log: bob.directory.file("s.log"))
        try server.waitFor("not announced by mDNS: listening on loopback only")
        #expect(!server.log.contains("announced as"))
        server.stop()
    }

    /// Issue 32: a second serve on the same keystore fails before touching the first one's
    /// agent socket, and names it. (It once removed the socket on its way to "address
    /// already in use", so `vault requests` said no serve ran.)
    @Test func aSecondServeLeavesTheFirstAlone() throws {
        let bob = try User().initialize("bob")
        let first = try bob.vault.background(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"], log: bob.directory.file("1.log"))
        let port = try first.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)")
        try first.waitFor("agent listening on")
        let second = try bob.fails("serve", "--listen", "127.0.0.1", "--port", port, "--no-mdns")
        #expect(second.contains("vault: error: a 'vault serve' runs for this keystore already (pid \(first.pid))"), "\(second)")
        #expect(!second.contains("agent listening"))
        // The first still answers its agent.
        let requests = try bob.vault.run("requests")
        #expect(requests.status == 0 && requests.stderr.contains("no requests wait"), "\(requests.stderr)")
        #expect(first.stop() == 0)
        // Once it stopped, a new serve starts.
        let third = try bob.vault.background(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"], log: bob.directory.file("3.log"))
        try third.waitFor("agent listening on")
        #expect(third.stop() == 0)
    }

    /// Issue 32: Ctrl-C stops a serve whose passphrase was typed on its terminal as it stops
    /// any other: its goodbye, "stopped", and no agent socket left behind. (The passphrase
    /// prompt once left SIGINT at its default, so serve died with 130 and a stale socket.)
    @Test func ctrlCStopsAServeUnlockedOnItsTerminal() throws {
        let bob = User()
        let words = try bob.directory.write("pass", Array("correct horse battery\n".utf8))
        try bob.initialize("bob", "--passphrase-file", words)
        let serve = try bob.vault.onTerminal(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"])
        try serve.expect("Passphrase for bob: ")
        serve.send("correct horse battery")
        try serve.expect("agent listening on")
        try serve.expect("as 'bob' (fingerprint ")
        serve.signal(SIGINT)
        try serve.expect("vault serve: stopped", timeout: 10)
        #expect(serve.finish().status == 0)
        #expect(!FileManager.default.fileExists(atPath: bob.vault.home + "/agent.sock"))
    }

    @Test func keepsUndeliveredBundlesUntilPushed() throws {
        let circle = try Circle(["alice", "bob"])
        let port = "127.0.0.1:\(Int.random(in: 20000...60000))"
        let shared = try circle["alice"].vault.run(["share", "-", "--to", "bob", "-k", "2", "--peer", "bob=\(port)"],
                                                   stdin: Array("later".utf8))
        #expect(shared.status == 1)
        #expect(shared.stderr.contains("vault: error: 1 holder did not receive a share: bob"))
        #expect(shared.stderr.contains("vault secrets push"))
        let id = shared.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let (bob, address) = try serve(circle, "bob")
        try circle["alice"].ok("secrets", "push", id, "--to", "bob", "--peer", "bob=\(address)")
        try bob.waitFor("stored share 2 of")
        #expect(try circle["alice"].fails("secrets", "push", id, "--to", "bob", "--peer", "bob=\(address)")
            .contains("did not receive"))
        bob.stop()
    }

    @Test func refusesUntrustedDealersAndUnconfirmedShares() throws {
        let circle = try Circle(["alice", "bob"])
        let eve = try User().initialize("eve")
        try eve.ok("peer", "add", circle["bob"].card(), "--label", "bob", "--yes")
        let (bob, address) = try serve(circle, "bob", ["--confirm"])
        let untrusted = try eve.vault.run(["share", "-", "--to", "bob", "-k", "2", "--peer", "bob=\(address)"], stdin: Array("x".utf8))
        #expect(untrusted.status == 1)
        #expect(untrusted.stderr.contains("bob: refused: untrusted key"))
        // --confirm with no terminal to ask on: refused, discarded, and the sender is told.
        let unconfirmed = try circle["alice"].vault.run(["share", "-", "--to", "bob", "-k", "2", "--peer", "bob=\(address)"],
                                                        stdin: Array("y".utf8))
        #expect(unconfirmed.stderr.contains("bob: refused: not confirmed by the holder"))
        #expect(try circle["bob"].ok("secrets", "list", "--json").contains("[") && !circle["bob"].ok("secrets", "list").contains("ID"))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: circle["bob"].vault.home).filter { $0.hasPrefix(".incoming") }
        #expect(leftovers.isEmpty)
        #expect(bob.stop(SIGINT) == 0)
    }
}
