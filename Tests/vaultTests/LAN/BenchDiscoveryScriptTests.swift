import Foundation
import Testing
import VaultTestSupport

/// Issue 14, finding 18: scripts/bench-discovery left its four `vault serve` processes
/// running (it recorded a subshell's pid, not the server's). It must leave none.
@Suite struct BenchDiscoveryScriptTests {
    /// The pids of processes whose command line mentions the script's work directories.
    static func leftovers() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: "/proc").filter { Int($0) != nil }.filter { pid in
            guard let raw = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            return String(decoding: raw, as: UTF8.self).contains("vault-bench-discovery.")
        }
    }

    @Test func leavesNoServerRunning() throws {
        guard getuid() == 0 else { return }  // ip netns needs root, as CI has
        #expect(try Self.leftovers().isEmpty)
        let script = ForeignNoiseTests.root.appendingPathComponent("scripts/bench-discovery").path
        var environment = ProcessInfo.processInfo.environment
        environment["VAULT"] = VaultBinary.path
        // Output to a file, not a pipe: a server left behind would hold a pipe open and hang
        // the test instead of failing it.
        let directory = TemporaryDirectory("vault-bench-log")
        let log = directory.file("out")
        let result = try ProcessRunner.run("/bin/bash", ["-c", "bash \"$0\" > \"$1\" 2>&1", script, log], environment: environment)
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(result.status == 0, "\(output)")
        #expect(output.contains("median"), "\(output)")
        let left = try Self.leftovers()
        for pid in left { kill(pid_t(pid)!, SIGKILL) }
        #expect(left.isEmpty, "servers left running: \(left)")
    }
}
