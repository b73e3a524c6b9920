import ArgumentParser
import Dispatch
import Foundation
import VaultCore
import VaultNet

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve trusted peers: receive their shares and answer their piece requests.",
        discussion: """
            Runs until interrupted (Ctrl-C or SIGTERM). Shares are accepted from trusted peers, \
            each only from its own dealer. A piece is released only to another holder of the \
            same secret who proves possession of its own share on that connection, at most \
            \(NetLimits.pieceRequestsPerMinute) requests per peer per minute. The server announces \
            itself by mDNS as _vault._tcp.local. (unless --no-mdns) and withdraws on exit. It also \
            runs the local key agent on $VAULT_HOME/agent.sock, for 'vault unlock' and the item \
            commands, answering only your own user.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Option(help: "The TCP port.")
    var port: Int = Int(NetLimits.defaultPort)

    @Option(help: ArgumentHelp("The address to listen on.", valueName: "addr"))
    var listen: String = "0.0.0.0"

    @Flag(help: "Ask on this terminal before storing each incoming share; without a terminal, refuse them.")
    var confirm = false

    @Flag(help: "Do not announce this server by mDNS.")
    var noMdns = false

    @Flag(help: "Let untrusted machines pair by short code ('vault pair'), each confirmed on this terminal, for a limited window.")
    var pairing = false

    @Option(help: ArgumentHelp("How long pairing stays open, in seconds (at most 300).", valueName: "s"))
    var pairingWindow: Int = 120

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port takes 0 to 65535") }
        guard (1...Int(NetLimits.maximumPairingWindow)).contains(pairingWindow) else {
            throw ValidationError("--pairing-window takes 1 to \(Int(NetLimits.maximumPairingWindow)) seconds")
        }
    }

    func run() async throws {
        if pairing && !Terminal.isAvailable { throw CLIError.confirmationRequired(what: "pairing") }
        let keystore = try home.openKeystore()
        let identity = try keys.unlock(keystore)
        var confirmation: PeerServer.Confirm?
        if confirm {
            confirmation = { @Sendable question in askToStore(question) }
        }
        let pairingWindow = TimeInterval(self.pairingWindow)
        let pairingSetup: (window: TimeInterval, confirm: Pairing.Confirm)? = pairing
            ? (pairingWindow, { @Sendable code, card, label in confirmPairing(code: code, card: card, label: label, keystore: keystore) })
            : nil
        let server = PeerServer(keystore: keystore, identity: identity, confirm: confirmation, pairing: pairingSetup) { line in
            Terminal.standardError("vault serve: \(line)")
        }
        let responder = ResponderBox()
        // A server on loopback only is reachable from this machine alone: announcing it on
        // the network would advertise an address nobody else can use.
        let loopbackOnly = listen.hasPrefix("127.") || listen == "::1" || listen == "localhost"
        let announce = !noMdns && !loopbackOnly, listen = self.listen
        if !noMdns && loopbackOnly { Terminal.standardError("vault serve: not announced by mDNS: listening on loopback only") }
        let agent = KeyAgent { line in Terminal.standardError("vault serve: \(line)") }
        let agentPath = KeyAgent.socketPath(keystore.home)
        let task = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await agent.run(path: agentPath) { Terminal.standardError("vault serve: agent listening on \(agentPath)") }
                }
                group.addTask {
                    try await server.run(host: listen, port: port) { bound in
                        if announce {
                            // A specific IPv4 listen address is the one to announce; otherwise every interface's.
                            let addresses = (try? SocketAddressBytes.ipv4(listen)).map { [$0] }
                            responder.start(MDNSResponder(label: identity.label.value, shortFingerprint: identity.card.shortFingerprint,
                                                          port: UInt16(bound), addresses: addresses))
                        }
                        Terminal.standardError("vault serve: listening on \(listen):\(bound) as '\(identity.label)' (fingerprint \(identity.card.fingerprint))")
                        if pairing { Terminal.standardError("vault serve: pairing is open for \(Int(pairingWindow)) s: run 'vault pair --peer HOST:\(bound)' on the other machine") }
                    }
                }
                // Either one ending (an error, or cancellation) ends the other.
                defer { group.cancelAll() }
                try await group.next()
            }
        }
        let signals = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .main)
            source.setEventHandler { task.cancel() }
            source.resume()
            return source
        }
        defer { signals.forEach { $0.cancel() } }
        do {
            try await task.value
            await responder.stop()
        } catch is CancellationError {
            await responder.stop()
        } catch let error as NetError {
            throw CLIError.invalidInput("cannot serve on \(listen):\(port): \(error)")
        } catch {
            await responder.stop()
            if task.isCancelled { return Terminal.standardError("vault serve: stopped") }
            throw CLIError.invalidInput("cannot serve on \(listen):\(port): \(error)")
        }
        Terminal.standardError("vault serve: stopped")
    }
}

/// The mDNS responder of a running server, started once the port is known.
final class ResponderBox: @unchecked Sendable {
    private var responder: MDNSResponder?
    private let lock = NSLock()

    func start(_ responder: MDNSResponder) {
        lock.withLock { self.responder = responder }
        Task {
            do {
                try await responder.start()
                Terminal.standardError("vault serve: announced as _vault._tcp.local. (fingerprint \(responder.fingerprintPrefix))")
            } catch {
                Terminal.standardError("vault serve: not announced by mDNS: \(error)")
            }
        }
    }

    /// Sends the goodbye.
    func stop() async {
        if let responder = lock.withLock({ responder }) { await responder.stop() }
    }
}

/// Parses a dotted IPv4 address; `0.0.0.0` and anything else is not one to announce.
enum SocketAddressBytes {
    static func ipv4(_ text: String) throws -> [UInt8] {
        let parts = text.split(separator: ".").compactMap { UInt8($0) }
        guard parts.count == 4, text.split(separator: ".").count == 4, parts != [0, 0, 0, 0] else {
            throw CLIError.invalidInput("not an IPv4 address")
        }
        return parts
    }
}

/// Asks on the terminal; no terminal means no, and the sender is told.
@Sendable func askToStore(_ question: String) -> Bool {
    (try? Terminal.confirm(question, what: "storing a share")) ?? false
}

/// `--peer LABEL=HOST:PORT`, where to reach a peer when its stored address is not enough.
struct PeerAddressOptions: ParsableArguments {
    @Option(name: .customLong("peer"), help: ArgumentHelp("Reach a peer at this address (repeatable).", valueName: "label=host:port"))
    var peers: [String] = []

    /// The address for each peer: given here, else stored with the peer, else found by mDNS
    /// (matching the short fingerprint) for those in `discovering`.
    func addresses(for peers: [Peer], discovering: [Peer], timeout: Double = 2) async throws -> [String: PeerAddress] {
        var all = try addresses(for: peers)
        let unknown = discovering.filter { all[$0.label.value] == nil }
        guard !unknown.isEmpty else { return all }
        let found = (try? await MDNSBrowser.browse(timeout: timeout, wanted: Set(unknown.map(\.card.shortFingerprint)))) ?? []
        for peer in unknown {
            if let service = found.first(where: { $0.fingerprint == peer.card.shortFingerprint }), let host = service.addresses.first {
                all[peer.label.value] = try? PeerAddress("\(host):\(service.port)")
            }
        }
        return all
    }

    /// The address for each peer: given here, else stored with the peer.
    func addresses(for peers: [Peer]) throws -> [String: PeerAddress] {
        var given: [String: PeerAddress] = [:]
        for entry in self.peers {
            guard let equals = entry.firstIndex(of: "=") else { throw ValidationError("--peer takes LABEL=HOST:PORT") }
            let label = try Label(String(entry[..<equals]))
            guard let peer = peers.first(where: { $0.label.value.lowercased() == label.value.lowercased() }) else {
                throw VaultError.unknownPeer(label.value)
            }
            given[peer.label.value] = try PeerAddress(String(entry[entry.index(after: equals)...]))
        }
        var all: [String: PeerAddress] = [:]
        for peer in peers { all[peer.label.value] = given[peer.label.value] ?? peer.address }
        return all
    }
}
