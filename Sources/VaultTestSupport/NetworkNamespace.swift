import Foundation

/// A network namespace of the test's own, with only loopback, set up for multicast as
/// DESIGN.md says: lo up, lo multicast on, 224.0.0.0/4 routed on lo. Needs root (CI is).
/// Nothing in it can reach any other address. Deleted when released.
public final class NetworkNamespace: @unchecked Sendable {
    public let name: String
    static let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "ip"

    public convenience init() throws {
        try self.init(multicastOnLoopback: true)
    }

    /// Two namespaces joined by a veth pair (`veth0` in each, 10.231.0.1/24 and
    /// 10.231.0.2/24), multicast routed on the link: two hosts on a private wire, for
    /// responders such as avahi that ignore loopback. Nothing else is reachable from either.
    public static func linked() throws -> (NetworkNamespace, NetworkNamespace) {
        let first = try NetworkNamespace(multicastOnLoopback: false)
        let second = try NetworkNamespace(multicastOnLoopback: false)
        try first.ip(["link", "add", "veth0", "netns", first.name, "type", "veth", "peer", "name", "veth0", "netns", second.name])
        for (namespace, address) in [(first, "10.231.0.1/24"), (second, "10.231.0.2/24")] {
            for command in [["addr", "add", address, "dev", "veth0"], ["link", "set", "veth0", "multicast", "on"],
                            ["link", "set", "veth0", "up"], ["route", "add", "224.0.0.0/4", "dev", "veth0"]] {
                try namespace.ip(["-n", namespace.name] + command)
            }
        }
        return (first, second)
    }

    /// The address of the servers in ``star(hosts:)``, the same from every host.
    public static let serverAddress = "10.99.0.1"

    /// A small internet: one namespace for servers, reached at ``serverAddress``, and `count`
    /// hosts, each joined to it by a veth pair of its own and routed to that address alone.
    /// The hosts reach the servers and never each other: nothing forwards between the
    /// links, and no link is shared, so multicast (mDNS) finds nobody. Friends in other
    /// cities, with relays between them.
    public static func star(hosts count: Int) throws -> (servers: NetworkNamespace, hosts: [NetworkNamespace]) {
        let servers = try NetworkNamespace(multicastOnLoopback: false)
        try servers.ip(["-n", servers.name, "addr", "add", serverAddress + "/32", "dev", "lo"])
        var hosts: [NetworkNamespace] = []
        for i in 1...count {
            let host = try NetworkNamespace(multicastOnLoopback: true)
            try servers.ip(["link", "add", "vh\(i)", "netns", servers.name, "type", "veth", "peer", "name", "veth0", "netns", host.name])
            try servers.ip(["-n", servers.name, "addr", "add", "10.231.\(i).1/24", "dev", "vh\(i)"])
            try servers.ip(["-n", servers.name, "link", "set", "vh\(i)", "up"])
            try host.ip(["-n", host.name, "addr", "add", "10.231.\(i).2/24", "dev", "veth0"])
            try host.ip(["-n", host.name, "link", "set", "veth0", "up"])
            try host.ip(["-n", host.name, "route", "add", serverAddress + "/32", "via", "10.231.\(i).1"])
            hosts.append(host)
        }
        return (servers, hosts)
    }

    private init(multicastOnLoopback: Bool) throws {
        name = "vault-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try ip(["netns", "add", name])
        try ip(["-n", name, "link", "set", "lo", "up"])
        if multicastOnLoopback {
            try ip(["-n", name, "link", "set", "lo", "multicast", "on"])
            try ip(["-n", name, "route", "add", "224.0.0.0/4", "dev", "lo", "src", "127.0.0.1"])
        }
    }

    private func ip(_ arguments: [String]) throws {
        let result = try ProcessRunner.run(Self.ip, arguments)
        guard result.status == 0 else {
            throw NSError(domain: "NetworkNamespace", code: Int(result.status),
                          userInfo: [NSLocalizedDescriptionKey: "ip \(arguments.joined(separator: " ")): \(result.stderr) (tests of discovery need root)"])
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
