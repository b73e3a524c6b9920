import ArgumentParser
import Foundation
import VaultCore
import VaultRelay
import VaultRelayClient

struct RelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay",
        abstract: "Run a relay, or pin the relays your groups use.",
        subcommands: [RelayServe.self, RelayInviteCommand.self, RelayAdd.self, RelayRedeem.self, RelayList.self, RelayRemove.self,
                      RelayCheck.self]
    )
}

struct RelayAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Pin a relay: its URL and the key card that must sign its answers.",
        discussion: """
            With --card, the card is the one its operator gave you. Without it, the card the \
            relay shows at URL/card is fetched, and vault asks you to confirm its fingerprint \
            against the one its operator shows you (--yes answers yes).
            """)

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("A local name for the relay.", valueName: "name"))
    var name: String

    @Argument(help: ArgumentHelp("Its base URL: https://host[:port] or http://host[:port].", valueName: "url"))
    var url: String

    @Option(help: ArgumentHelp("The relay's key card (vault1…).", valueName: "card"))
    var card: String?

    @OptionGroup var confirmation: ConfirmOption

    func run() async throws {
        let label = try Label(name)
        let base = try RelayURL.check(url)
        let keystore = try home.openKeystore()
        // A card given is read before the relay is asked, a mistyped one said as such; in
        // any form a card is shown in (with a #label, as `vault id` prints it).
        let given = try card.map { try CardOffer(text: $0).card }
        let (info, shown) = try await RelayConnection.fetchCard(url: base)
        let pinned: KeyCard
        if let given {
            pinned = given
            guard pinned == shown else {
                throw CLIError.unavailable("the relay at \(base) shows another card than the one given",
                                           hint: "check the URL and the card with the relay's operator; do not pin it")
            }
        } else {
            try confirmation.confirm("Does this fingerprint match the one the relay's operator shows? Pin this relay?",
                                     details: ["relay        \(label)", "url          \(base)", "fingerprint  \(shown.fingerprint)"],
                                     what: "pinning a relay")
            pinned = shown
        }
        try keystore.pinRelay(label: label, url: base, card: pinned)
        Terminal.standardError("pinned relay '\(label)' at \(base) (fingerprint \(pinned.fingerprint); "
            + "keeps messages up to \(DurationText.text(info.maxTTL)), shares up to \(ByteCount.limit(info.maxMessage)))")
    }
}

struct RelayList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the pinned relays.")

    @OptionGroup var home: HomeOption

    func run() throws {
        let relays = try home.openKeystore().pinnedRelays()
        if relays.isEmpty { Terminal.standardError("no relays pinned: 'vault relay add NAME URL' pins one") }
        for relay in relays {
            print("\(relay.label)\t\(relay.url)\t\(relay.card.fingerprint)")
        }
    }
}

struct RelayRemove: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rm", abstract: "Forget a pinned relay.")

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The relay's name.", valueName: "name"), completion: Completions.relay)
    var name: String

    func run() throws {
        try home.openKeystore().unpinRelay(named: name)
        Terminal.standardError("forgot relay '\(name)'")
    }
}

struct RelayCheck: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check", abstract: "Check the pinned relays: reachable, the pinned card, and clock skew.")

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("A relay's name (default: every pinned relay).", valueName: "name"), completion: Completions.relay)
    var name: String?

    func run() async throws {
        let keystore = try home.openKeystore()
        let relays = try name.map { [try keystore.pinnedRelay(named: $0)] } ?? keystore.pinnedRelays()
        var failed = 0
        for relay in relays {
            do {
                let (info, card) = try await RelayConnection.fetchCard(url: relay.url)
                guard card == relay.card else {
                    throw RelayError(relay: relay.label.value, code: "forged",
                                     words: "it shows another card than the pinned one (fingerprint \(card.fingerprint))")
                }
                let skew = Int64(bitPattern: info.time &- VaultClock.seconds())
                print("\(relay.label)\tok\t\(relay.card.fingerprint)\tclock skew \(skew) s")
            } catch {
                failed += 1
                print("\(relay.label)\tfailed\t\(Report.words(for: error))")
            }
        }
        if failed > 0 { throw CLIError.unavailable("\(failed) of \(relays.count) relays failed the check", hint: "see the lines above") }
    }
}

/// Durations on the command line: 90, 90s, 30m, 12h, 7d (``DurationText``, which also
/// prints them).
enum Duration {
    static func seconds(_ text: String) throws -> UInt64 {
        guard let seconds = DurationText.seconds(text) else {
            throw ValidationError("'\(text)' is not a duration of at most 10 years: write 90s, 30m, 12h or 7d")
        }
        return seconds
    }
}
