import Foundation

/// The built `vault` executable, driven in a temporary home as a user would.
public struct VaultBinary: Sendable {
    /// The executable's path: `$VAULT_BIN`, else `vault` beside the test bundle in the same
    /// build folder (what `swift build` produces before `swift test` runs).
    public static let path: String = {
        if let explicit = ProcessInfo.processInfo.environment["VAULT_BIN"], !explicit.isEmpty { return explicit }
        let runner = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var directory = runner.deletingLastPathComponent()
        // The runner may sit inside a bundle (…/vaultPackageTests.xctest/…).
        while directory.path != "/" {
            let candidate = directory.appendingPathComponent("vault").path
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory), !isDirectory.boolValue {
                return candidate
            }
            directory.deleteLastPathComponent()
        }
        return "vault-binary-not-built (run 'swift build' first or set VAULT_BIN)"
    }()

    /// The measuring harness, `vault-bench`, built beside ``path``.
    public static var benchPath: String {
        URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent("vault-bench").path
    }

    /// The home every command runs in.
    public let home: String
    /// Extra environment for every command.
    public var environment: [String: String]

    /// How a command is started: by default the binary itself; inside a namespace, a
    /// wrapper (see ``SmallDisk``).
    public var launcher: @Sendable (_ executable: String, _ arguments: [String]) -> (String, [String]) = { ($0, $1) }
    /// Where the test finds the files the commands see (the keystore): "" unless the
    /// commands run in a mount namespace of their own.
    public var fileRoot = ""

    public init(home: String, environment: [String: String] = [:]) {
        self.home = home
        self.environment = environment
    }

    /// The environment a child sees: the test's own, with NO_COLOR cleared and VAULT_HOME set.
    public var childEnvironment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["NO_COLOR"] = nil
        env["VAULT_HOME"] = home
        env.merge(environment) { $1 }
        return env
    }

    /// Runs `vault ARGUMENTS` with no controlling terminal.
    @discardableResult
    public func run(_ arguments: String..., stdin: String = "") throws -> ProcessResult {
        try run(arguments, stdin: Array(stdin.utf8))
    }

    /// Runs `vault ARGUMENTS` with no controlling terminal.
    public func run(_ arguments: [String], stdin: [UInt8] = []) throws -> ProcessResult {
        let (executable, all) = launcher(Self.path, arguments)
        return try ProcessRunner.run(executable, all, stdin: stdin, environment: childEnvironment)
    }

    /// Starts `vault ARGUMENTS` with a pseudo-terminal as its controlling terminal.
    public func interactive(_ arguments: String...) throws -> TerminalSession {
        try TerminalSession(Self.path, arguments, environment: childEnvironment)
    }

    /// Starts `vault ARGUMENTS` with a pseudo-terminal as its controlling terminal and as
    /// its standard error, as a person at a terminal runs it.
    public func onTerminal(_ arguments: [String], environment extra: [String: String] = [:]) throws -> TerminalSession {
        try TerminalSession(Self.path, arguments, environment: childEnvironment.merging(extra) { $1 }, standardErrorOnTerminal: true)
    }

    /// Starts `vault ARGUMENTS` as typed at a shell prompt: the pseudo-terminal is its
    /// controlling terminal, its standard input and its standard output (what it prints
    /// shows in the transcript, with the terminal's `\r\n` line ends); standard error stays
    /// a pipe, for ``TerminalSession/finish()``.
    public func atPrompt(_ arguments: [String]) throws -> TerminalSession {
        try TerminalSession("/bin/sh", ["-c", "exec \"$0\" \"$@\" </dev/tty >/dev/tty", Self.path] + arguments, environment: childEnvironment)
    }

    /// The keystore file's bytes: tests compare them before and after a refused command.
    public func keystoreBytes() -> Data? {
        FileManager.default.contents(atPath: fileRoot + home + "/vault.sqlite")
    }
}
