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
