import Foundation
import Testing
import VaultTestSupport

/// One run of scripts/install into a temporary directory, with the debug binary the other
/// tests drive (`--binary`), so that the suite never pays for a release build.
final class Installation: @unchecked Sendable {
    static let script = ForeignNoiseTests.root.appendingPathComponent("scripts/install").path

    let directory = TemporaryDirectory("vault-install")
    /// HOME for the script and for what the tests run from the installed files.
    var home: String { directory.file("home") }

    /// The environment the script runs in: HOME inside the directory, no XDG variables, so
    /// that `--user` lands in the directory too.
    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home
        for name in ["XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "VAULT_HOME"] { environment[name] = nil }
        return environment
    }

    init() throws {
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
    }

    /// Runs scripts/install with `arguments` (and `--binary` unless uninstalling); a failure
    /// throws with what the script printed.
    @discardableResult
    func install(_ arguments: [String]) throws -> ProcessResult {
        let binary = arguments.contains("--uninstall") ? [] : ["--binary", VaultBinary.path]
        let result = try ProcessRunner.run("/bin/bash", [Self.script] + arguments + binary, environment: environment)
        guard result.status == 0 else { throw Failure("scripts/install \(arguments.joined(separator: " ")): status \(result.status)\n\(result.stderr)") }
        return result
    }

    /// Whether swift-argument-parser's generate-manual tool is in .build (scripts/test runs
    /// the plugin once before the tests; scripts/man --check needs it).
    static var manualToolBuilt: Bool {
        ["debug", "release"].contains {
            FileManager.default.isExecutableFile(atPath: ForeignNoiseTests.root.appendingPathComponent(".build/\($0)/generate-manual-tool").path)
        }
    }

    /// Every file and directory under `path`, relative to it (directories end in /).
    static func tree(_ path: String) -> Set<String> {
        var entries = Set<String>()
        guard let walker = FileManager.default.enumerator(atPath: path) else { return entries }
        while let entry = walker.nextObject() as? String {
            let isDirectory = walker.fileAttributes?[.type] as? FileAttributeType == .typeDirectory
            entries.insert(isDirectory ? entry + "/" : entry)
        }
        return entries
    }

    /// Runs a program, for the checkers (man, shells, systemd-analyze, desktop-file-validate).
    func run(_ executable: String, _ arguments: [String], environment extra: [String: String] = [:]) throws -> ProcessResult {
        try ProcessRunner.run(executable, arguments, environment: environment.merging(extra) { $1 })
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

/// The command paths of the vault binary's commands (`vault`, `vault peer add`, …), from the
/// description ArgumentParser dumps, which generate-manual reads too.
func commandPaths() throws -> [[String]] {
    let dump = try VaultBinary(home: "/nonexistent").run("--experimental-dump-help")
    struct Command: Decodable { let commandName: String; let subcommands: [Command]? }
    struct Dump: Decodable { let command: Command }
    func walk(_ command: Command, _ path: [String]) -> [[String]] {
        [path] + (command.subcommands ?? []).flatMap { walk($0, path + [$0.commandName]) }
    }
    let root = try JSONDecoder().decode(Dump.self, from: Data(dump.stdoutBytes)).command
    return walk(root, [root.commandName])
}
