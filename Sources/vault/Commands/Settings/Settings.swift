import ArgumentParser
import Foundation
import VaultCore

struct SettingsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "settings",
        abstract: "Keystore settings: the vault:// result destinations allowed without a terminal.",
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
        abstract: "Let vault:// requests whose results go to DESTINATION run without a terminal to confirm them.",
        discussion: """
            DESTINATION is where results go: an application's scheme ('myapp:', as in \
            x-success=myapp://…), a web origin ('https://example.com'), or '-' for standard \
            output (the program that ran 'vault url -'). x-source plays no part: any caller can \
            claim any name. A decrypt request sends a plaintext to a web origin only if that \
            origin is allowed, even on a terminal. Nothing is served from a locked key.
            """)

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("'-', SCHEME: or https://HOST[:PORT].", valueName: "destination"))
    var destination: String

    func run() throws {
        let destination = try CallbackDestination(allowing: destination)
        let added = try home.openKeystore().allowURLDestination(destination)
        Terminal.standardError(added ? "vault:// results may go to \(destination) without a terminal" : "\(destination) was already allowed")
    }
}

struct SettingsURLDeny: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "url-deny", abstract: "Take DESTINATION off the vault:// allowlist.")

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("As given to url-allow.", valueName: "destination"))
    var destination: String

    func run() throws {
        let keystore = try home.openKeystore()
        let destination: CallbackDestination
        do {
            destination = try CallbackDestination(allowing: self.destination)
        } catch {
            // Taking one off cannot widen what is allowed: a name stored as a scheme before
            // url-allow refused it as ambiguous is taken off as the scheme it was stored as.
            guard case .ambiguousDestination(let text) = error,
                  let scheme = try? CallbackDestination(allowing: String(text.prefix { $0 != ":" }) + ":"),
                  try keystore.isURLDestinationAllowed(scheme)
            else { throw error }
            destination = scheme
        }
        let removed = try keystore.denyURLDestination(destination)
        Terminal.standardError(removed ? "\(destination) is off the allowlist" : "\(destination) was not on the allowlist")
    }
}
