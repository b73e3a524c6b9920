import Foundation

/// A network namespace of the test's own, with only loopback, set up for multicast as
/// DESIGN.md says: lo up, lo multicast on, 224.0.0.0/4 routed on lo. Needs root (CI is).
/// Nothing in it can reach any other address. Deleted when released.
public final class NetworkNamespace: @unchecked Sendable {
    public let name: String
    static let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "ip"

    public init() throws {
        name = "vault-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        for command in [["netns", "add", name],
                        ["netns", "exec", name, Self.ip, "link", "set", "lo", "up"],
                        ["netns", "exec", name, Self.ip, "link", "set", "lo", "multicast", "on"],
                        ["netns", "exec", name, Self.ip, "route", "add", "224.0.0.0/4", "dev", "lo", "src", "127.0.0.1"]] {
            let result = try ProcessRunner.run(Self.ip, command)
            guard result.status == 0 else {
                throw NSError(domain: "NetworkNamespace", code: Int(result.status),
                              userInfo: [NSLocalizedDescriptionKey: "ip \(command.joined(separator: " ")): \(result.stderr) (tests of discovery need root)"])
            }
        }
    }

    deinit { _ = try? ProcessRunner.run(Self.ip, ["netns", "delete", name]) }

    /// The arguments that run `executable ARGUMENTS` inside the namespace.
    public func wrap(_ executable: String, _ arguments: [String]) -> (String, [String]) {
        (Self.ip, ["netns", "exec", name, executable] + arguments)
    }

    /// Runs a program inside the namespace and waits for it.
    public func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> ProcessResult {
        let (tool, all) = wrap(executable, arguments)
        return try ProcessRunner.run(tool, all, environment: environment)
    }

    /// Starts a program inside the namespace in the background.
    public func background(_ executable: String, _ arguments: [String], environment: [String: String], log: String) throws -> BackgroundProcess {
        let (tool, all) = wrap(executable, arguments)
        return try BackgroundProcess(tool, all, environment: environment, logPath: log)
    }
}
