import Foundation
import Testing
import VaultCore
import VaultTestSupport

/// `vault relay serve --tls-cert/--tls-key`, against clients that trust the relay's CA
/// through VAULT_RELAY_CA and clients that do not. The CA is the test's own, made with
/// Debian's openssl; its certificate names 127.0.0.1 only.
@Suite(.serialized) struct RelayTLSTests {
    final class Authority {
        let directory = TemporaryDirectory("vault-relay-tls")
        var ca: String { directory.file("ca.pem") }
        var certificate: String { directory.file("cert.pem") }
        var key: String { directory.file("key.pem") }

        init() throws {
            _ = try directory.write("san.cnf", Array("subjectAltName=IP:127.0.0.1\n".utf8))
            for arguments in [
                ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", directory.file("ca.key"),
                 "-out", ca, "-days", "2", "-subj", "/CN=vault test CA"],
                ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                 "-out", directory.file("req.csr"), "-subj", "/CN=127.0.0.1"],
                ["x509", "-req", "-in", directory.file("req.csr"), "-CA", ca, "-CAkey", directory.file("ca.key"), "-CAcreateserial",
                 "-out", certificate, "-days", "2", "-extfile", directory.file("san.cnf")],
            ] {
                let result = try ProcessRunner.run("/usr/bin/openssl", arguments)
                #expect(result.status == 0, "openssl \(arguments[0]): \(result.stderr)")
            }
        }
    }

    private func relay(_ authority: Authority, _ name: String) throws -> (BackgroundProcess, String) {
        let relay = try BackgroundProcess(VaultBinary.path, ["relay", "serve", "--listen", "127.0.0.1:0",
                                                             "--tls-cert", authority.certificate, "--tls-key", authority.key,
                                                             "--store", "sqlite:" + authority.directory.file(name + ".db")],
                                          environment: [:], logPath: authority.directory.file(name + ".log"))
        _ = try relay.waitFor("fingerprint ")
        let line = relay.log.split(separator: "\n").first { $0.contains("listening on ") } ?? ""
        return (relay, String(line.split(separator: " ").last ?? ""))
    }

    @Test func aMessageCrossesTLSRelaysWhoseCAIsTrusted() throws {
        let authority = try Authority()
        let (one, url1) = try relay(authority, "r1")
        let (two, url2) = try relay(authority, "r2")
        defer { _ = one.stop(SIGKILL); _ = two.stop(SIGKILL) }
        #expect(url1.hasPrefix("https://127.0.0.1:"), "\(url1)")

        let alice = User("alice"), bob = User("bob")
        try alice.initialize("alice")
        try bob.initialize("bob")
        try alice.ok("peer", "add", try bob.card(), "--label", "bob", "--yes")
        try bob.ok("peer", "add", try alice.card(), "--label", "alice", "--yes")
        for user in [alice, bob] { user.vault.environment["VAULT_RELAY_CA"] = authority.ca }
        try alice.ok("relay", "add", "r1", url1, "--yes")
        try alice.ok("relay", "add", "r2", url2, "--yes")
        try bob.ok("relay", "add", "r1", url1, "--yes")
        let check = try alice.ok("relay", "check")
        #expect(check.split(separator: "\n").filter { $0.contains("\tok") }.count == 2, "\(check)")
        try alice.ok("group", "create", "team", "--relays", "r1,r2", "--members", "bob")
        try alice.ok("send", "--group", "team", "-", stdin: "over TLS")
        let received = try bob.vault.run(["receive"])
        #expect(received.status == 0, "\(received.stderr)")
        #expect(received.stdout.hasPrefix("over TLS"), "\(received.stdout)")
    }

    @Test func aRelayWhoseCertificateIsNotTrustedIsRefusedInWords() throws {
        let authority = try Authority()
        let (one, url) = try relay(authority, "r1")
        defer { _ = one.stop(SIGKILL) }
        let carol = User("carol")
        try carol.initialize("carol")

        // No VAULT_RELAY_CA: the system's roots do not know the test's CA.
        var stderr = try carol.fails("relay", "add", "r1", url, "--yes")
        #expect(stderr.contains("relay \(url): cannot reach it: its TLS certificate is not trusted here or does not name its host"), "\(stderr)")
        #expect(stderr.contains("VAULT_RELAY_CA"), "\(stderr)")

        // Plain HTTP to a TLS port.
        stderr = try carol.fails("relay", "add", "r1", url.replacingOccurrences(of: "https://", with: "http://"), "--yes")
        #expect(stderr.contains("relay http://127.0.0.1:"), "\(stderr)")

        // A trust file that holds no certificate is said, not ignored.
        carol.vault.environment["VAULT_RELAY_CA"] = authority.key
        stderr = try carol.fails("relay", "add", "r1", url, "--yes")
        #expect(stderr.contains("VAULT_RELAY_CA=\(authority.key) is not a readable PEM file of certificates"), "\(stderr)")

        // And with the right CA, it is pinned.
        carol.vault.environment["VAULT_RELAY_CA"] = authority.ca
        try carol.ok("relay", "add", "r1", url, "--yes")
    }

    @Test func aStoppedRelayIsSaidInWords() throws {
        let authority = try Authority()
        let (one, url) = try relay(authority, "r1")
        let dave = User("dave")
        try dave.initialize("dave")
        dave.vault.environment["VAULT_RELAY_CA"] = authority.ca
        try dave.ok("relay", "add", "r1", url, "--yes")
        #expect(one.stop(SIGTERM) == 0)
        let check = try dave.vault.run(["relay", "check"])
        #expect(check.stdout.contains("cannot reach it: the connection was refused (is it running?)"), "\(check.stdout)\(check.stderr)")
    }

    /// A TLS client that connected and then went quiet held a stopping relay for 5 s (NIOSSL's
    /// default wait for the peer's close_notify, issue 47 minor 7); the relay now gives a
    /// quiet peer half a second, so it stops at once and says so.
    @Test func aRelayStopsAtOnceWithAQuietTLSClient() throws {
        let authority = try Authority()
        let (one, url) = try relay(authority, "r1")
        defer { _ = one.stop(SIGKILL) }
        let address = url.replacingOccurrences(of: "https://", with: "")
        // A handshake done, and then nothing: the shell keeps s_client's input open.
        let quiet = try BackgroundProcess("/bin/sh", ["-c", "sleep 120 | exec /usr/bin/openssl s_client -connect \(address) -CAfile \(authority.ca)"],
                                          environment: [:], logPath: authority.directory.file("client.log"))
        defer { _ = quiet.stop(SIGKILL) }
        try quiet.waitFor("Verify return code: 0")
        let start = ProcessInfo.processInfo.systemUptime
        #expect(one.stop(SIGTERM) == 0)
        let took = ProcessInfo.processInfo.systemUptime - start
        #expect(took < 4, "the relay took \(took) s to stop")
        #expect(one.log.contains("vault relay: stopped"), "\(one.log)")
    }
}
