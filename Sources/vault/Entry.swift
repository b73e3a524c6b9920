import ArgumentParser
import CVaultProcess
import Foundation
import VaultCore

/// The `vault` command: parses, calls VaultCore, prints, and maps failures to exit codes.
struct Vault: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vault",
        abstract: "A peer-authenticated threshold vault.",
        discussion: "Every machine has an identity; people trust each other face to face by exchanging key cards.",
        version: "0.1.0",
        subcommands: [Init.self, Id.self, PeerCommand.self, Passphrase.self, Share.self, SecretsCommand.self, Recover.self, RecoverWords.self, KeyCommand.self, KeysCommand.self, Unlock.self, Lock.self, ItemCommand.self, Scan.self, Reshare.self, Url.self, SettingsCommand.self, Serve.self, Requests.self, Approve.self, Deny.self, Pair.self, Nearby.self, RelayCommand.self, GroupCommand.self, Send.self, Receive.self, SyncCommand.self, AppCommand.self, LinkCommand.self]
    )
}

@main
enum Entry {
    static func main() async {
        // Secrets must not land in core files, and other processes of this user must not
        // read this one's memory (ptrace, /proc/PID/mem): every command may hold key material.
        var noCore = rlimit(rlim_cur: 0, rlim_max: 0)
        setrlimit(Int32(RLIMIT_CORE.rawValue), &noCore)
        _ = vault_disable_dumping()
        var command: ParsableCommand
        do {
            command = try Vault.parseAsRoot()
        } catch {
            commandLine(error)
        }
        do {
            if var asynchronous = command as? AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        } catch {
            // Whatever a command throws is reported in words (Report), never as Swift
            // describes it; only ArgumentParser's own errors go on to commandLine.
            if let code = Report.handle(error) { exit(code) }
            commandLine(error)
        }
    }

    /// Help and version requests print as ArgumentParser formats them; mistakes on the
    /// command line get the same two-line shape as every other error.
    static func commandLine(_ error: Error) -> Never {
        let code = Vault.exitCode(for: error)
        guard code == .validationFailure else { Vault.exit(withError: error) }
        Report.usage(Vault.message(for: error), arguments: Array(CommandLine.arguments.dropFirst()))
        exit(code.rawValue)
    }
}
