import Foundation
import Testing
import VaultTestSupport

/// Hostile load on one `vault serve` (scripts/lib/load.py, on loopback only): a legitimate
/// recovery still succeeds, and the server survives within its bounds and lets every
/// connection go.
@Suite struct LoadTests {
    static let tool = ForeignNoiseTests.root.appendingPathComponent("scripts/lib/load.py").path

    /// The figures the tool printed: its last line, a JSON object.
    final class Report: @unchecked Sendable {
        var result: ProcessResult?
        var json: [String: Any] {
            let line = result?.stdout.split(separator: "\n").last.map(String.init) ?? ""
            return (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] ?? [:]
        }
        func count(_ key: String) -> Int { (json["counts"] as? [String: Any])?[key] as? Int ?? 0 }
    }

    @Test func recoveryWorksWhileHostilePeersLoadTheServer() throws {
        #expect(FileManager.default.fileExists(atPath: ForeignNoiseTests.python), "run scripts/test: it makes .build-venv")
        let circle = try Circle(["alice", "bob", "carol"])
        let note = try circle.files.write("note.txt", Array("under load".utf8))
        let id = try circle.share(from: "alice", [note, "--to", "bob,carol", "-k", "2"])
        let server = try circle["bob"].vault.background(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"],
                                                        log: circle.files.file("serve.log"))
        let port = try server.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)")

        // Carol, trusted by bob and a holder of the secret, floods him with piece requests
        // (bad proofs) and oversized headers; the rest comes from nobody he trusts.
        let report = Report()
        let done = DispatchSemaphore(value: 0)
        let arguments = [Self.tool, "--port", port, "--pid", String(server.pid), "--seconds", "20",
                         "--keystore", circle["carol"].vault.home + "/vault.sqlite", "--secret", id,
                         "--requester", "3", "--holder", "2"]
        DispatchQueue.global().async {
            report.result = try? ProcessRunner.run(ForeignNoiseTests.python, arguments)
            done.signal()
        }
        sleep(6)
        // Carol gets an address nobody listens on: every holder has one, so nothing browses
        // by mDNS, whose queries would leave loopback.
        let recovered = try circle["alice"].vault.run(["recover", id, "--peer", "bob=127.0.0.1:\(port)",
                                                       "--peer", "carol=127.0.0.1:1", "--timeout", "30"])
        done.wait()

        #expect(recovered.status == 0, "\(recovered.stderr)")
        #expect(recovered.stdout == "under load")
        let figures = report.json
        #expect(report.result?.status == 0, "\(report.result?.stderr ?? "")")
        print("hostile load: \(report.result?.stdout ?? "")")
        #expect(figures["alive"] as? Bool == true)
        #expect((figures["peak_rss_kib"] as? Int ?? .max) < 128 * 1024, "\(figures)")
        #expect(figures["final_fds"] as? Int == figures["baseline_fds"] as? Int, "a connection was not released: \(figures)")
        // The load arrived, and the server dealt with each kind as it should.
        #expect(report.count("idle closed by server") > 0, "\(figures)")
        #expect(report.count("slow closed by server") > 0, "\(figures)")
        #expect(report.count("untrusted answered 5/01") > 0, "\(figures)")
        #expect(report.count("piece requests answered 5/0a") > 0, "rate limiting: \(figures)")
        #expect(report.count("piece requests answered 5/03") > 0, "bad proofs: \(figures)")
        #expect(report.count("flood not welcomed 5") == 0, "\(figures)")
        // Still serving, and the flood shows in its log as counts, not as thousands of lines.
        #expect(server.stop() == 0)
        #expect(server.log.split(separator: "\n").count < 400, "\(server.log.suffix(2000))")
        #expect(server.log.contains("more like it before"))
    }

    /// A serve stopped while connections pour in stops cleanly. NIO hands accepted
    /// connections over through a buffer; stopping once dropped that buffer, and a
    /// connection dropped unclosed trapped the process ("Deinited NIOAsyncWriter without
    /// calling finish()"), as vault-bench's LAN bench did under load.
    @Test func aServeStoppedDuringABurstOfConnectionsExitsCleanly() throws {
        let bob = User("bob")
        try bob.initialize("bob")
        for round in 0..<3 {
            let serve = try bob.vault.background(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"],
                                                 log: bob.directory.file("serve-\(round).log"))
            let port = Int(try serve.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)"))!
            try serve.waitFor("agent listening on")
            let sockets = (0..<300).map { i in
                if i == 150 { kill(serve.pid, SIGTERM) }
                return (try? LoopbackHTTP.connect(port: port, from: "127.0.3.\(1 + i % 50)")) ?? -1
            }
            let status = serve.wait()
            for socket in sockets where socket >= 0 { close(socket) }
            #expect(status == 0, "round \(round): exit status \(status): \(serve.log.suffix(1500))")
            #expect(!serve.log.contains("Fatal error"), "\(serve.log.suffix(1500))")
        }
    }
}
