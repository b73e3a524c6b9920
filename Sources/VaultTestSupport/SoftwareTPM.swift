import Foundation

/// A throwaway TPM 2.0 (Debian's `swtpm`, libtpms inside) in socket mode on loopback: its
/// state in a temporary directory, started already (`--flags not-need-init,startup-clear`,
/// as firmware and the kernel start a real one), stopped when the value is released. Point
/// vault at it with ``environment`` (`VAULT_TPM=swtpm:host=127.0.0.1,port=N`); tpm2-tools
/// reach it with ``tool(_:_:)``. Each value is another TPM: another storage key, so a
/// keystore sealed by one does not open on another.
public final class SoftwareTPM: @unchecked Sendable {
    /// The command port; the control port is the next one (the swtpm TCTI's convention).
    public let port: Int
    /// The TCTI configuration for tpm2-tss.
    public var tcti: String { "swtpm:host=127.0.0.1,port=\(port)" }
    /// The environment that points vault at this TPM.
    public var environment: [String: String] { ["VAULT_TPM": tcti] }
    private let directory = TemporaryDirectory("vault-swtpm")
    private var server: BackgroundProcess?

    public init() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/swtpm") else {
            throw Self.failure("swtpm is not installed (scripts/test installs Debian's swtpm and tpm2-tools)")
        }
        port = try Self.freePortPair()
        let state = directory.file("state")
        mkdir(state, 0o700)
        let server = try BackgroundProcess("/usr/bin/swtpm", [
            "socket", "--tpm2", "--tpmstate", "dir=\(state)",
            "--server", "type=tcp,port=\(port),bindaddr=127.0.0.1", "--ctrl", "type=tcp,port=\(port + 1),bindaddr=127.0.0.1",
            "--flags", "not-need-init,startup-clear", "--log", "file=\(directory.file("swtpm.log"))",
        ], environment: ["PATH": "/usr/bin:/bin"], logPath: directory.file("stdout.log"))
        self.server = server
        // Ready once both ports take connections.
        let deadline = Date().addingTimeInterval(20)
        while !(Self.accepts(port) && Self.accepts(port + 1)) {
            guard Date() < deadline else { throw Self.failure("swtpm did not listen on \(port): \(server.log)") }
            usleep(20_000)
        }
    }

    // SIGKILL: the state is thrown away, and a process spawned from a test runner may start
    // with SIGTERM blocked (swtpm does not unblock it), so SIGTERM could wait for ever.
    deinit { server?.stop(SIGKILL) }

    /// Runs a tpm2-tools program against this TPM and returns its stdout; fails on a
    /// non-zero exit.
    @discardableResult
    public func tool(_ name: String, _ arguments: [String]) throws -> String {
        let result = try attempt(name, arguments)
        guard result.status == 0 else { throw Self.failure("\(name) \(arguments.joined(separator: " ")): \(result.stderr)") }
        return result.stdout
    }

    /// Runs a tpm2-tools program against this TPM, whatever its exit status: for what the
    /// TPM is meant to refuse.
    public func attempt(_ name: String, _ arguments: [String]) throws -> ProcessResult {
        try ProcessRunner.run("/usr/bin/" + name, arguments,
                              environment: ["TPM2TOOLS_TCTI": tcti, "PATH": "/usr/bin:/bin", "TSS2_LOG": "all+NONE"])
    }

    /// Extends a SHA-256 PCR, as a boot stage measuring something new would.
    public func extendPCR(_ index: Int) throws {
        try tool("tpm2_pcrextend", ["\(index):sha256=" + String(repeating: "ab", count: 32)])
    }

    /// Sets the dictionary-attack parameters: `maxTries` failures before lockout, one
    /// forgotten every `interval` seconds, and the lockout hierarchy itself refusing for
    /// `interval` seconds after a wrong authorization. `auth` is the lockout hierarchy's
    /// authorization, in tpm2-tools' words (`hex:…`, or the text itself), when it has one.
    public func setLockout(maxTries: Int, interval: Int, auth: String? = nil) throws {
        try tool("tpm2_dictionarylockout", ["--setup-parameters", "--max-tries=\(maxTries)", "--recovery-time=\(interval)",
                                            "--lockout-recovery-time=\(interval)"] + Self.authArguments(auth))
    }

    /// Ends a lockout and forgets every failure, as the lockout hierarchy's owner may, with
    /// its authorization `auth` when it has one (as ``setLockout(maxTries:interval:auth:)``).
    public func clearLockout(auth: String? = nil) throws {
        try tool("tpm2_dictionarylockout", ["--clear-lockout"] + Self.authArguments(auth))
    }

    /// Whether the lockout hierarchy has an authorization value (`lockoutAuthSet` of
    /// TPM2_PT_PERMANENT).
    public func lockoutAuthorizationIsSet() throws -> Bool {
        let properties = try tool("tpm2_getcap", ["properties-variable"])
        guard let line = properties.split(separator: "\n").first(where: { $0.contains("lockoutAuthSet:") }) else {
            throw Self.failure("tpm2_getcap shows no lockoutAuthSet: \(properties)")
        }
        return line.hasSuffix("1")
    }

    /// Gives the lockout hierarchy the authorization `new` (empty: none), as the machine's
    /// owner may; `current` is the one it has, when it has one.
    public func changeLockoutAuthorization(to new: String, from current: String? = nil) throws {
        try tool("tpm2_changeauth", ["--object-context=lockout"] + (current.map { ["--object-auth=\($0)"] } ?? []) + (new.isEmpty ? [] : [new]))
    }

    private static func authArguments(_ auth: String?) -> [String] {
        auth.map { ["--auth=\($0)"] } ?? []
    }

    /// Two consecutive loopback ports nothing listens on now.
    private static func freePortPair() throws -> Int {
        for _ in 0..<50 {
            let port = try freePort()
            if port < 65535 && !accepts(port + 1) && canBind(port + 1) { return port }
        }
        throw failure("no two free consecutive loopback ports")
    }

    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = loopback(0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw failure("no free loopback port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func canBind(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = loopback(port)
        return withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    private static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = loopback(port)
        return withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    private static func loopback(_ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return address
    }

    private static func failure(_ words: String) -> NSError {
        NSError(domain: "SoftwareTPM", code: 1, userInfo: [NSLocalizedDescriptionKey: words])
    }
}
