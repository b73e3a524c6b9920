import ArgumentParser
import Foundation
import VaultCore
import VaultRelay
import VaultRelayClient

struct RelayServe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run a relay: stores what members of groups address to each other, for a time to live.",
        discussion: """
            The relay sees ciphertext, sizes, times, group records (names, members' labels and \
            keys) and the signed headers of shares, never their content. Its own \
            key card (printed when it starts, and served at /card) signs every answer; clients \
            pin it. Docs/RELAY.md says what a TTL on a server can and cannot promise.

            Who may own groups: on loopback, anyone; beyond it, only the cards of --owners and \
            those who redeem an invite from 'vault relay invite' (--group-owners says otherwise). \
            Members take a group only from an owner they trust, and the relay serves them only \
            once they have.
            """)

    @Option(help: ArgumentHelp("Where to listen (port 0 picks a free one).", valueName: "host:port"))
    var listen: String = "127.0.0.1:7780"

    @OptionGroup var store: RelayStoreOption

    @Option(help: ArgumentHelp("TLS certificate chain (PEM); without it the relay speaks plain HTTP.", valueName: "file"))
    var tlsCert: String?

    @Option(help: ArgumentHelp("TLS private key (PEM).", valueName: "file"))
    var tlsKey: String?

    @Option(help: ArgumentHelp("The longest time to live a message may ask for (e.g. 7d, 12h, 30m).", valueName: "duration"))
    var maxTtl: String = "7d"

    @Option(help: ArgumentHelp("The longest message share, 1 KiB to 1 GiB (bytes, or e.g. 64MiB).", valueName: "size"))
    var maxMessage = SizeArgument(64 << 20)

    @Option(help: ArgumentHelp("Who may own groups: anyone, or listed (the cards of --owners and invited owners).",
                               discussion: "Default: anyone when listening on loopback, listed otherwise.", valueName: "policy"))
    var groupOwners: String?

    @Option(help: ArgumentHelp("A file of key cards (vault1…, one a line) that may own groups and make signed links.", valueName: "file"))
    var owners: String?

    @Option(help: ArgumentHelp("Groups one owner may register.", valueName: "n"))
    var groupsPerOwner = 100

    @Option(help: ArgumentHelp("The most of unexpired messages one group may keep (bytes, or e.g. 1GiB).", valueName: "size"))
    var groupQuota = SizeArgument(1 << 30)

    @Option(help: ArgumentHelp("The most of unexpired messages and group records one owner's groups may keep.", valueName: "size"))
    var ownerQuota = SizeArgument(4 << 30)

    @Option(help: ArgumentHelp("The most of unexpired messages and group records on the relay, all together.", valueName: "size"))
    var totalQuota = SizeArgument(16 << 30)

    @Option(help: ArgumentHelp("The largest share link, 1 KiB to 1 GiB (bytes, or e.g. 32MiB).", valueName: "size"))
    var maxLink = SizeArgument(32 << 20)

    @Option(help: ArgumentHelp("The most of unexpired share links, all together (bytes, or e.g. 1GiB).", valueName: "size"))
    var linkQuota = SizeArgument(1 << 30)

    @Option(help: ArgumentHelp("Who may make share links: anyone, or listed (signed by a card of --owners or an invited owner).",
                               valueName: "policy"))
    var links: String = "anyone"

    @Option(help: ArgumentHelp("The longest time to live of a link not signed by a listed card.", valueName: "duration"))
    var anonymousLinkTtl: String = "1d"

    @Option(help: ArgumentHelp("The most of unexpired links one client address (IPv6: its /64) may keep.", valueName: "size"))
    var linkQuotaPerAddress = SizeArgument(64 << 20)

    @Option(help: ArgumentHelp("Unexpired links one client address (IPv6: its /64) may keep.", valueName: "n"))
    var linksPerAddress = 100

    @Option(help: ArgumentHelp("Share links one client address may create a minute.", valueName: "n"))
    var linksPerMinute: UInt64 = 60

    @Option(help: ArgumentHelp("Requests a second one client address (IPv6: its /64) may make, in bursts of ten times as many; raise it behind a proxy.",
                               valueName: "n"))
    var addressRate: UInt64 = 50

    @Option(help: ArgumentHelp("Connections held at most, all together (also kept under the open-file limit).", valueName: "n"))
    var maxConnections = 4096

    @Option(help: ArgumentHelp("Connections held at most from one client address (IPv6: its /64); 0 for no cap, behind a proxy.",
                               valueName: "n"))
    var maxConnectionsPerAddress = 64

    @Option(help: ArgumentHelp("How long a client has to send a request's head: from connecting, or from its first byte.",
                               valueName: "duration"))
    var headerTimeout: String = "10s"

    @Option(help: ArgumentHelp("How long a connection may wait between requests.", valueName: "duration"))
    var idleTimeout: String = "60s"

    @Option(help: ArgumentHelp("How long a request's body may stay silent; past that, it must average 1 KiB/s.", valueName: "duration"))
    var bodyTimeout: String = "30s"

    @Option(help: ArgumentHelp("Seconds between sweeps of expired messages and links.", valueName: "seconds"))
    var sweepInterval: UInt64 = 60

    func run() async throws {
        var configuration = RelayConfiguration(store: try store.location())
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
        try policy(&configuration)
        guard maxLink.bytes >= 1024, maxLink.bytes <= LinkClient.largestBlob else {
            throw ValidationError("--max-link is 1 KiB to \(ByteCount.limit(LinkClient.largestBlob))")
        }
        guard linksPerMinute >= 1, linksPerMinute <= 100_000 else { throw ValidationError("--links-per-minute is 1 to 100000") }
        configuration.maximumLink = maxLink.bytes
        configuration.linkQuota = linkQuota.bytes
        configuration.linksPerMinute = Double(linksPerMinute)
        guard addressRate >= 1, addressRate <= 1_000_000 else { throw ValidationError("--address-rate is 1 to 1000000") }
        configuration.addressRequestsPerSecond = Double(addressRate)
        try connections(&configuration)
        guard sweepInterval >= 1 else { throw ValidationError("--sweep-interval is at least 1") }
        configuration.sweepInterval = sweepInterval
        let owners = configuration.ownerPolicy == .anyone ? "anyone may own groups"
            : "groups by listed owners only (\(configuration.ownerCards.count) in --owners, and invites)"
        let makers = configuration.linkMakers == .anyone ? "anyone" : "listed cards only"
        let perAddress = configuration.connections.perAddress == 0 ? "no cap" : "\(configuration.connections.perAddress)"
        let limits = "messages up to \(DurationText.text(configuration.maximumTTL)) and \(ByteCount.limit(configuration.maximumMessage)) a share, "
            + "\(ByteCount.limit(configuration.groupQuota)) a group, \(ByteCount.limit(configuration.ownerQuota)) an owner, "
            + "\(ByteCount.limit(configuration.totalQuota)) in all; links up to \(ByteCount.limit(configuration.maximumLink)), "
            + "\(ByteCount.limit(configuration.linkQuota)) in all"
        let location = configuration.store
        let host = configuration.host
        let plainBeyondLoopback = configuration.tls == nil && !(host.hasPrefix("127.") || host == "::1" || host == "localhost")
        try await RelayServer.run(configuration) { listening in
            print("vault relay: listening on \(listening.url)")
            print("card         \(listening.card.text)")
            print("fingerprint  \(listening.card.fingerprint)")
            print("policy       \(owners); links by \(makers)")
            print("limits       \(limits)")
            print("connections  \(listening.connections) at most, \(perAddress) an address (open files: \(listening.files))")
            fflush(stdout)
            if case .sqlite(let path) = location { Self.warnIfReadableByOthers(path) }
            if plainBeyondLoopback { Self.warnPlainHTTP(host) }
        }
        Terminal.standardError("vault relay: stopped")
    }

    /// Beyond loopback without TLS: what travels is signed and sealed, but the network sees
    /// who talks to the relay, when and how much, and could hold requests back; said at
    /// start, with what to do.
    static func warnPlainHTTP(_ host: String) {
        Terminal.standardError("vault: warning: serving plain HTTP on \(host), beyond this machine: messages stay sealed and signed, "
                               + "but the network sees who talks to the relay, when and how much")
        Terminal.standardError("vault: hint: give --tls-cert and --tls-key, or put a TLS proxy in front and listen on 127.0.0.1")
    }

    /// A store file the relay made is 0600; one that already existed keeps its mode (an
    /// operator may share it with a group on purpose), but it holds the relay's private key,
    /// with which anyone who reads it can answer as the relay: said at every start, as
    /// WireGuard says of a configuration others can read.
    static func warnIfReadableByOthers(_ path: String) {
        for file in [path, path + "-wal", path + "-shm"] {
            var info = stat()
            guard stat(file, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_mode & 0o077 != 0 else { continue }
            Terminal.standardError("vault: warning: \(file) is open to other users (mode \(String(info.st_mode & 0o777, radix: 8))), "
                                   + "and the store holds the relay's private key")
            Terminal.standardError("vault: hint: chmod 600 \(path)*")
            return
        }
    }

    /// Who may own groups and make links, and the quotas.
    private func policy(_ configuration: inout RelayConfiguration) throws {
        if let groupOwners {
            guard let policy = RelayConfiguration.Owners(rawValue: groupOwners) else { throw ValidationError("--group-owners is anyone or listed") }
            configuration.owners = policy
        } else if owners != nil {
            configuration.owners = .listed
        }
        if let owners { configuration.ownerCards = try OwnersFile.read(owners) }
        guard let makers = RelayConfiguration.LinkMakers(rawValue: links) else { throw ValidationError("--links is anyone or listed") }
        configuration.linkMakers = makers
        guard groupsPerOwner >= 1 else { throw ValidationError("--groups-per-owner is at least 1") }
        configuration.groupsPerOwner = groupsPerOwner
        configuration.groupQuota = groupQuota.bytes
        configuration.ownerQuota = ownerQuota.bytes
        configuration.totalQuota = totalQuota.bytes
        configuration.anonymousLinkTTL = try Duration.seconds(anonymousLinkTtl)
        configuration.linkQuotaPerAddress = linkQuotaPerAddress.bytes
        guard linksPerAddress >= 1 else { throw ValidationError("--links-per-address is at least 1") }
        configuration.linksPerAddress = linksPerAddress
    }

    /// Connection caps and deadlines.
    private func connections(_ configuration: inout RelayConfiguration) throws {
        guard maxConnections >= 1 else { throw ValidationError("--max-connections is at least 1") }
        guard maxConnectionsPerAddress >= 0 else { throw ValidationError("--max-connections-per-address is 0 (no cap) or more") }
        var limits = ConnectionLimits()
        limits.total = maxConnections
        limits.perAddress = maxConnectionsPerAddress
        limits.header = Int64(try Duration.seconds(headerTimeout))
        limits.idle = Int64(try Duration.seconds(idleTimeout))
        limits.body = Int64(try Duration.seconds(bodyTimeout))
        guard limits.header >= 1, limits.idle >= 1, limits.body >= 1 else { throw ValidationError("timeouts are at least 1s") }
        configuration.connections = limits
    }
}
