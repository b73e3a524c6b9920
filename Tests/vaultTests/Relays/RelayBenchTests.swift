import Foundation
import Testing
import VaultTestSupport

/// `vault-bench --relay` (issue 37) measures, and the tests do not time it; they hold it to
/// measuring what it says: every request of each kind served as the relay serves it, by
/// either client, so a figure is never the rate of refusals.
@Suite struct RelayBenchTests {
    @Test(arguments: ["vault", "plain"])
    func everyRequestOfTheThroughputPartIsServed(client: String) throws {
        let scratch = TemporaryDirectory("vault-relay-bench")
        let result = try ProcessRunner.run(VaultBinary.benchPath, [
            "--relay", "--parts", "throughput", "--requests", "60", "--concurrency", "6", "--identities", "5",
            "--client", client, "--scratch", scratch.path,
        ])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").filter { $0.hasPrefix("SQLite, 1 process") }
        #expect(lines.map { $0.split(separator: " ", omittingEmptySubsequences: true)[3] } == ["PUT", "list", "GET", "confirm"],
                "\(result.stdout)")
        for line in lines {
            #expect(!line.contains("failed"), "\(line)")
            #expect(line.contains("relay CPU"), "\(line)")
            // The machine ran the bench meanwhile, so it was busy some of the time, and
            // never more than all of it.
            let busy = line.split(separator: " ", omittingEmptySubsequences: true).firstIndex(of: "machine").flatMap { i in
                Int(line.split(separator: " ", omittingEmptySubsequences: true)[i + 1].dropLast())
            }
            #expect(busy.map { (1...100).contains($0) } == true, "\(line)")
        }
        #expect(result.stdout.contains(client == "plain" ? "signed beforehand and sent by a plain client" : "by vault's client"))
    }

    @Test func anUnknownClientIsRefused() throws {
        let result = try ProcessRunner.run(VaultBinary.benchPath, ["--relay", "--client", "wrk"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("--client is vault or plain"), "\(result.stderr)")
    }
}
