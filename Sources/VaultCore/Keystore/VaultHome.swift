import Foundation

/// Where a user's keystore lives.
///
/// Resolved in order: an explicit directory (`--home`), `VAULT_HOME`,
/// `$XDG_DATA_HOME/vault`, then `~/.local/share/vault`.
public struct VaultHome: Sendable, Equatable {
    /// The directory, kept at mode 0700.
    public let directory: String

    /// The keystore file inside it, kept at mode 0600.
    public var keystorePath: String { directory + "/vault.sqlite" }

    /// A home at exactly `directory`.
    public init(directory: String) {
        self.directory = directory
    }

    /// Resolves the home from an explicit choice and the environment.
    public static func resolve(
        explicit: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> VaultHome {
        if let explicit, !explicit.isEmpty { return VaultHome(directory: explicit) }
        if let home = environment["VAULT_HOME"], !home.isEmpty { return VaultHome(directory: home) }
        // The XDG spec says relative values are invalid and must be ignored.
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
            return VaultHome(directory: data + "/vault")
        }
        let user = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return VaultHome(directory: user + "/.local/share/vault")
    }
}

extension VaultHome {
    /// The name of a file this process writes and removes itself: a bundle being received or
    /// dealt, a piece being released or gathered. It carries the process id, so that
    /// ``sweepTransientFiles()`` can tell a file left by a killed process from one in use.
    public static func transientFileName(_ suffix: String) -> String {
        ".transient-\(getpid())-\(UUID().uuidString).\(suffix)"
    }

    /// A path for a transient file in the home directory.
    public func transientPath(_ suffix: String) -> String { directory + "/" + Self.transientFileName(suffix) }

    /// A new transient file in `folder` (default: the home directory), whose errors name
    /// the folder ("…: No space left on device"), not the file's internal name.
    public func transientFile(_ suffix: String, in folder: String? = nil) throws(VaultError) -> OutputFile {
        let folder = folder ?? directory
        return try OutputFile(path: folder + "/" + Self.transientFileName(suffix), shownAs: "the vault directory \(folder)")
    }

    /// Removes the transient files, in the home, its outbox and its pieces folder, of processes that no longer
    /// run. A process killed (SIGKILL, power loss) between writing such a file and removing
    /// it leaves it behind. They hold only sealed bytes, never plaintext, but a half-written
    /// bundle must not outlive its writer. A file whose process still runs is kept: it is
    /// in use.
    public func sweepTransientFiles() {
        for folder in [directory, directory + "/outbox", directory + "/pieces", directory + "/spool"] {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] {
                let fields = name.split(separator: "-", maxSplits: 2)
                guard fields.count == 3, fields[0] == ".transient", let pid = pid_t(fields[1]), pid > 0 else { continue }
                if ProcessTable.isGone(pid) { unlink(folder + "/" + name) }
            }
        }
    }
}
