import ArgumentParser
import Foundation
import VaultCore
import VaultRelay
import VaultRelayClient

struct RelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay",
        abstract: "Run a relay, or pin the relays your groups use.",
        subcommands: [RelayServe.self, RelayAdd.self, RelayList.self, RelayRemove.self, RelayCheck.self]
    )
}

struct RelayServe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run a relay: stores what members of groups address to each other, for a time to live.",
        discussion: """
            The relay sees ciphertext, sizes, times, group records (names, members' labels and \
            keys) and the signed headers of shares, never their content. Its own \
            key card (printed when it starts, and served at /card) signs every answer; clients \
            pin it. Docs/RELAY.md says what a TTL on a server can and cannot promise.
            """)

    @Option(help: ArgumentHelp("Where to listen (port 0 picks a free one).", valueName: "host:port"))
    var listen: String = "127.0.0.1:7780"

    @Option(help: ArgumentHelp(
        "Where the relay keeps its data: sqlite:PATH, or postgres://USER@HOST[:PORT]/DATABASE (password in PGPASSWORD).",
        discussion: "Default: sqlite:relay.db in the vault directory (--home).", valueName: "store"))
    var store: String?

    @OptionGroup var home: HomeOption

    @Option(help: ArgumentHelp("TLS certificate chain (PEM); without it the relay speaks plain HTTP.", valueName: "file"))
    var tlsCert: String?

    @Option(help: ArgumentHelp("TLS private key (PEM).", valueName: "file"))
    var tlsKey: String?

    @Option(help: ArgumentHelp("The longest time to live a message may ask for (e.g. 7d, 12h, 30m).", valueName: "duration"))
    var maxTtl: String = "7d"

    @Option(help: ArgumentHelp("The longest message share, 1 KiB to 1 GiB (bytes, or e.g. 64MiB).", valueName: "size"))
    var maxMessage = SizeArgument(64 << 20)

    @Option(help: ArgumentHelp("The most of unexpired messages one group may keep (bytes, or e.g. 1GiB).", valueName: "size"))
    var groupQuota = SizeArgument(1 << 30)

    @Option(help: ArgumentHelp("The largest share link, 1 KiB to 1 GiB (bytes, or e.g. 32MiB).", valueName: "size"))
    var maxLink = SizeArgument(32 << 20)

    @Option(help: ArgumentHelp("The most of unexpired share links, all together (bytes, or e.g. 1GiB).", valueName: "size"))
    var linkQuota = SizeArgument(1 << 30)

    @Option(help: ArgumentHelp("Share links one client address may create a minute.", valueName: "n"))
    var linksPerMinute: UInt64 = 60

    @Option(help: ArgumentHelp("Seconds between sweeps of expired messages and links.", valueName: "seconds"))
    var sweepInterval: UInt64 = 60

    func run() async throws {
        let location: RelayConfiguration.Store
        if let store {
            do {
                location = try RelayConfiguration.Store(parsing: store)
            } catch {
                throw ValidationError("\(error)")
            }
        } else {
            let directory = home.vaultHome.directory
            if mkdir(directory, 0o700) != 0 && errno != EEXIST { throw VaultError.fileSystem(path: directory, reason: String(cString: strerror(errno))) }
            location = .sqlite(path: directory + "/relay.db")
        }
        var configuration = RelayConfiguration(store: location)
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]), (0...65535).contains(port) else {
            throw ValidationError("--listen takes HOST:PORT")
        }
        configuration.host = String(listen[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        configuration.port = port
        switch (tlsCert, tlsKey) {
        case let (cert?, key?): configuration.tls = (cert, key)
        case (nil, nil): break
        default: throw ValidationError("--tls-cert and --tls-key go together")
        }
        configuration.maximumTTL = try Duration.seconds(maxTtl)
        guard maxMessage.bytes >= 1024, maxMessage.bytes <= IncomingMessageShare.largest else {
            throw ValidationError("--max-message is 1 KiB to \(ByteCount.limit(IncomingMessageShare.largest))")
        }
        configuration.maximumMessage = maxMessage.bytes
        configuration.groupQuota = groupQuota.bytes
        guard maxLink.bytes >= 1024, maxLink.bytes <= LinkClient.largestBlob else {
            throw ValidationError("--max-link is 1 KiB to \(ByteCount.limit(LinkClient.largestBlob))")
        }
        guard linksPerMinute >= 1, linksPerMinute <= 100_000 else { throw ValidationError("--links-per-minute is 1 to 100000") }
        configuration.maximumLink = maxLink.bytes
        configuration.linkQuota = linkQuota.bytes
        configuration.linksPerMinute = Double(linksPerMinute)
        guard sweepInterval >= 1 else { throw ValidationError("--sweep-interval is at least 1") }
        configuration.sweepInterval = sweepInterval
        let limits = "messages up to \(DurationText.text(configuration.maximumTTL)) and \(ByteCount.limit(configuration.maximumMessage)) a share, "
            + "\(ByteCount.limit(configuration.groupQuota)) a group; links up to \(ByteCount.limit(configuration.maximumLink)), "
            + "\(ByteCount.limit(configuration.linkQuota)) in all"
        try await RelayServer.run(configuration) { listening in
            print("vault relay: listening on \(listening.url)")
            print("card         \(listening.card.text)")
            print("fingerprint  \(listening.card.fingerprint)")
            print("limits       \(limits)")
            fflush(stdout)
        }
    }
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
        let (info, shown) = try await RelayConnection.fetchCard(url: base)
        let pinned: KeyCard
        if let card {
            pinned = try KeyCard(text: card)
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
                let skew = Int64(bitPattern: info.time &- UInt64(Date().timeIntervalSince1970))
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
