import ArgumentParser
import Foundation
import VaultCore

struct SettingsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "settings",
        abstract: "Keystore settings: the vault:// sources allowed without a terminal.",
        subcommands: [SettingsList.self, SettingsURLAllow.self, SettingsURLDeny.self],
        defaultSubcommand: SettingsList.self)
}

struct SettingsList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "Show the settings.")

    @OptionGroup var home: HomeOption

    func run() throws {
        let sources = try home.openKeystore().urlAllowList()
        print("url-allow  \(sources.isEmpty ? "-" : sources.joined(separator: ", "))")
    }
}

struct SettingsURLAllow: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "url-allow",
        abstract: "Serve vault:// requests from SOURCE (its x-source) without a terminal to confirm them.",
        discussion: """
            x-source is whatever the calling program says it is: allow only a name that no other \
            program you run would claim. Even an allowed source gets nothing from a locked key.
            """)

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The x-source value, exactly.", valueName: "source"))
    var source: String

    func run() throws {
        let added = try home.openKeystore().allowURLSource(source)
        Terminal.standardError(added ? "vault:// requests from '\(source)' no longer need a terminal" : "'\(source)' was already allowed")
    }
}

struct SettingsURLDeny: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "url-deny", abstract: "Take SOURCE off the vault:// allowlist.")

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The x-source value, exactly.", valueName: "source"))
    var source: String

    func run() throws {
        let removed = try home.openKeystore().denyURLSource(source)
        Terminal.standardError(removed ? "'\(source)' is off the allowlist" : "'\(source)' was not on the allowlist")
    }
}
