import ArgumentParser
import Foundation
import VaultCore
import VaultRelay
import VaultRelayClient
import VaultRelayProtocol

/// `--store` and `--home`, for the commands that open a relay's store.
struct RelayStoreOption: ParsableArguments {
    @Option(help: ArgumentHelp(
        "Where the relay keeps its data: sqlite:PATH, or postgres://USER@HOST[:PORT]/DATABASE (password in PGPASSWORD).",
        discussion: "Default: sqlite:relay.db in the vault directory (--home).", valueName: "store"))
    var store: String?

    @OptionGroup var home: HomeOption

    func location() throws -> RelayConfiguration.Store {
        if let store {
            do {
                return try RelayConfiguration.Store(parsing: store)
            } catch {
                throw ValidationError("\(error)")
            }
        }
        let directory = home.vaultHome.directory
        if mkdir(directory, 0o700) != 0 && errno != EEXIST { throw VaultError.fileSystem(path: directory, reason: String(cString: strerror(errno))) }
        return .sqlite(path: directory + "/relay.db")
    }
}

struct RelayInviteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "invite",
        abstract: "Make an invite that lets someone own groups on your relay (for its operator).",
        discussion: """
            Prints the invite (vault-invite-…), which the relay's store keeps only as a hash. \
            Give it by a channel you trust: whoever holds it can redeem it, with 'vault relay \
            redeem', as many times as --uses allows, until it expires. A running relay honours \
            it at once.
            """)

    @OptionGroup var store: RelayStoreOption

    @Option(help: ArgumentHelp("Owners who may redeem it.", valueName: "n"))
    var uses = 1

    @Option(help: ArgumentHelp("How long it can be redeemed (e.g. 7d, 12h).", valueName: "duration"))
    var valid: String = "7d"

    func run() async throws {
        guard (1...10_000).contains(uses) else { throw ValidationError("--uses is 1 to 10000") }
        let lifetime = try Duration.seconds(valid)
        let text = try await RelayInvites.create(in: try store.location(), uses: uses, lifetime: lifetime)
        print(text)
        Terminal.standardError("an invite for \(uses) owner\(uses == 1 ? "" : "s"), valid \(DurationText.text(lifetime)): "
            + "give it by a channel you trust; they run 'vault relay redeem RELAY' and paste it")
    }
}

struct RelayRedeem: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "redeem",
        abstract: "Redeem an operator's invite, so you may own groups on a pinned relay.",
        discussion: """
            Without INVITE, or with -, the invite is read from the terminal (not echoed) or from \
            standard input: a command line is readable by every local user while vault runs.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The pinned relay.", valueName: "name"), completion: Completions.relay)
    var name: String

    @Argument(help: ArgumentHelp("The invite; - reads it from standard input; none asks on the terminal.", valueName: "invite"))
    var invite: String?

    func run() async throws {
        let keystore = try home.openKeystore()
        let relay = try keystore.pinnedRelay(named: name)
        let text = try SecretLine.read(invite, what: "invite", prompt: "Invite (not shown as you type or paste it): ", longest: 1024,
                                       hint: "give it on standard input: vault relay redeem \(name) - < FILE")
        guard RelayInvite.token(text) != nil else {
            throw CLIError.unavailable("that is not an invite (vault-invite-…)", hint: "copy the whole line 'vault relay invite' printed")
        }
        let identity = try keys.unlock(keystore)
        try await Messenger.redeem(invite: text, at: relay, identity: identity)
        Terminal.standardError("relay '\(relay.label)' lets you own groups now")
    }
}
