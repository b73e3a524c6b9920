import Foundation
import Testing
import VaultTestSupport

/// mDNS/DNS-SD inside a network namespace of the test's own, against python-zeroconf
/// (from PyPI, in .build-venv) as an independent peer.
@Suite(.serialized) struct DiscoveryTests {
    static let python = ForeignNoiseTests.python
    static let peer = ForeignNoiseTests.root.appendingPathComponent("Tests/Interop/zeroconf_peer.py").path

    func serve(_ user: User, in namespace: NetworkNamespace) throws -> (BackgroundProcess, String) {
        let process = try namespace.background(VaultBinary.path, ["serve", "--listen", "0.0.0.0", "--port", "0"], environment: user.vault.childEnvironment,
                                               log: user.directory.file("serve-\(UUID().uuidString).log"))
        let port = try process.waitFor("listening on 0\\.0\\.0\\.0:(\\d+)")
        try process.waitFor("announced as _vault._tcp.local.")
        return (process, port)
    }

    @Test func zeroconfResolvesVaultServe() throws {
        let namespace = try NetworkNamespace()
        let bob = try User().initialize("bob")
        let (server, port) = try serve(bob, in: namespace)
        let browse = try namespace.run(Self.python, [Self.peer, "browse", "3"])
        #expect(browse.status == 0, "\(browse.stderr)")
        let line = try #require(browse.stdout.split(separator: "\n").first { $0.hasPrefix("bob-") })
        #expect(line.contains("._vault._tcp.local. 127.0.0.1 \(port) fp="))
        #expect(line.hasSuffix(" v=1"))
        // fp is the first 16 hex digits of the card's fingerprint hash, as `vault nearby` shows it.
        let nearby = try namespace.run(VaultBinary.path, ["nearby", "--timeout", "1.5"], environment: bob.vault.childEnvironment)
        let words = nearby.stdout.split(separator: " ")
        let fp = try #require(words.firstIndex(of: "fp").map { String(words[$0 + 1]) })
        #expect(line.contains("fp=\(fp)"))
        #expect(nearby.stdout.contains("trusted") && fp.count == 16)
        server.stop()
    }

    /// avahi, a second independent stack, on the other end of a link: it browses, then
    /// resolves SRV, TXT and A through its own daemon.
    @Test func avahiBrowseResolvesVaultServe() throws {
        let (here, there) = try NetworkNamespace.linked()
        let bob = try User().initialize("bob")
        let (server, port) = try serve(bob, in: here)
        let avahi = try AvahiDaemon(in: there, interface: "veth0")
        let browse = try there.run("/usr/bin/timeout", ["20", "avahi-browse", "--resolve", "--parsable", "--terminate", "_vault._tcp"],
                                   environment: avahi.environment)
        #expect(browse.status == 0, "\(browse.stderr)")
        // =;IFACE;PROTO;INSTANCE;TYPE;DOMAIN;HOST;ADDRESS;PORT;TXT
        let fields = try #require(browse.stdout.split(separator: "\n").first { $0.hasPrefix("=;") }?.split(separator: ";").map(String.init),
                                  "\(browse.stdout)\(browse.stderr)")
        #expect(fields.count == 10)
        #expect(fields[3].hasPrefix("bob-") && fields[4] == "_vault._tcp" && fields[5] == "local")
        #expect(fields[6].hasPrefix("vault-") && fields[6].hasSuffix(".local"))
        #expect(fields[7] == "10.231.0.1" && fields[8] == port)
        let nearby = try here.run(VaultBinary.path, ["nearby", "--timeout", "1.5"], environment: bob.vault.childEnvironment)
        let words = nearby.stdout.split(separator: " ")
        let fp = try #require(words.firstIndex(of: "fp").map { String(words[$0 + 1]) }, "\(nearby.stdout)\(nearby.stderr)")
        #expect(fields[9] == "\"fp=\(fp)\" \"v=1\"")
        server.stop()
    }

    @Test func vaultFindsAServiceZeroconfRegisters() throws {
        let namespace = try NetworkNamespace()
        let alice = try User().initialize("alice")
        let registered = try namespace.background(Self.python, [Self.peer, "register", "8"], environment: ProcessInfo.processInfo.environment,
                                                  log: alice.directory.file("zc.log"))
        try registered.waitFor("registered")
        let nearby = try namespace.run(VaultBinary.path, ["nearby", "--timeout", "2", "--json"], environment: alice.vault.childEnvironment)
        #expect(nearby.status == 0, "\(nearby.stderr)")
        let entries = try JSONSerialization.jsonObject(with: Data(nearby.stdout.utf8)) as! [[String: Any]]
        let entry = try #require(entries.first { $0["instance"] as? String == "zeroconf-peer" })
        #expect(entry["port"] as? Int == 7999)
        #expect(entry["addresses"] as? [String] == ["127.0.0.1"])
        #expect(entry["fingerprint"] as? String == "00112233445566ff")
        #expect(entry["trustedAs"] == nil)
        registered.stop()
    }

    @Test func sendsAGoodbyeOnExit() throws {
        let namespace = try NetworkNamespace()
        let bob = try User().initialize("bob")
        let watcher = try namespace.background(Self.python, [Self.peer, "watch", "12"], environment: ProcessInfo.processInfo.environment,
                                               log: bob.directory.file("watch.log"))
        try watcher.waitFor("watching")
        let (server, _) = try serve(bob, in: namespace)
        try watcher.waitFor("added bob-")
        #expect(server.stop(SIGTERM) == 0)
        try watcher.waitFor("removed bob-", timeout: 8)
        watcher.stop()
    }

    /// With nothing but mDNS to go on, a share reaches its holders and comes back.
    @Test func sharesAndRecoversByDiscoveryAlone() throws {
        let namespace = try NetworkNamespace()
        let circle = try Circle(["alice", "bob", "carol"])
        let (bob, _) = try serve(circle["bob"], in: namespace)
        let (carol, _) = try serve(circle["carol"], in: namespace)
        // No --peer and no stored address: the holders are found by their fingerprints.
        let share = try namespace.run("/bin/sh", ["-c", "echo found by mdns | \"$0\" share - --to bob,carol -k 2", VaultBinary.path],
                                      environment: circle["alice"].vault.childEnvironment)
        #expect(share.status == 0, "\(share.stderr)")
        #expect(share.stderr.contains("bob: delivered to 127.0.0.1:") && share.stderr.contains("carol: delivered to 127.0.0.1:"))
        let id = share.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        carol.stop()
        // Only bob is up; alice recovers from her share and bob's, found by mDNS.
        let recovered = try namespace.run(VaultBinary.path, ["recover", id, "--timeout", "15"], environment: circle["alice"].vault.childEnvironment)
        #expect(recovered.status == 0, "\(recovered.stderr)")
        #expect(recovered.stdout == "found by mdns\n")
        #expect(recovered.stderr.contains("carol: not found nearby"))
        bob.stop()
    }
}
