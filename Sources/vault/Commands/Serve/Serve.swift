import ArgumentParser
import Dispatch
import Foundation
import VaultCore
import VaultNet
import VaultRelayClient

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve trusted peers: receive their shares and answer their piece requests.",
        discussion: """
            Runs until interrupted (Ctrl-C or SIGTERM). Shares are accepted from trusted peers, \
            each only from its own dealer. A piece is released only to another holder of the \
            same secret who proves possession of its own share on that connection, at most \
            \(NetLimits.pieceRequestsPerMinute) requests per peer per minute, and only with your \
            consent: each request waits up to \(Int(NetLimits.approvalSeconds)) s for a yes on this terminal \
            or from 'vault approve ID' (see 'vault requests'), unless you chose automatic release \
            for that peer ('vault secrets auto-release'). It listens on loopback unless --listen \
            names another address (--listen 0.0.0.0 for every interface). The server announces \
            itself by mDNS as _vault._tcp.local. (unless --no-mdns) and withdraws on exit. It also \
            runs the local key agent on $VAULT_HOME/agent.sock, for 'vault unlock' and the item \
            commands, answering only your own user.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Option(help: "The TCP port.")
    var port: Int = Int(NetLimits.defaultPort)

    @Option(help: ArgumentHelp("The address to listen on: 127.0.0.1 (this machine only) unless you name one; 0.0.0.0 serves the LAN.",
                               valueName: "addr"))
    var listen: String = "127.0.0.1"

    @Flag(help: "Ask on this terminal before storing each incoming share; without a terminal, refuse them.")
    var confirm = false

    @Flag(help: "Do not announce this server by mDNS.")
    var noMdns = false

    @Flag(help: "Let untrusted machines pair by short code ('vault pair'), each confirmed on this terminal, for a limited window.")
    var pairing = false

    @Option(help: ArgumentHelp("How long pairing stays open, in seconds (at most 300).", valueName: "s"))
    var pairingWindow: Int = 120

    @Option(help: ArgumentHelp("How long a piece request waits for your consent, in seconds (5 to \(Int(NetLimits.approvalSeconds))).",
                               valueName: "s"))
    var consentTimeout: Int = Int(NetLimits.approvalSeconds)

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port takes 0 to 65535") }
        guard (1...Int(NetLimits.maximumPairingWindow)).contains(pairingWindow) else {
            throw ValidationError("--pairing-window takes 1 to \(Int(NetLimits.maximumPairingWindow)) seconds")
        }
        guard (5...Int(NetLimits.approvalSeconds)).contains(consentTimeout) else {
            throw ValidationError("--consent-timeout takes 5 to \(Int(NetLimits.approvalSeconds)) seconds")
        }
    }

    func run() async throws {
        // Signals are caught before anything is printed: a SIGTERM sent as soon as the first
        // line appears (systemd, a test) must stop the server, not fall into the moment
        // between ignoring the signal and its source starting to listen.
        let stop = StopSignal()
        let signals = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .main)
            source.setEventHandler { stop.fire() }
            source.resume()
            return source
        }
        defer { signals.forEach { $0.cancel() } }
        if pairing && !Terminal.isAvailable { throw CLIError.confirmationRequired(what: "pairing") }
        let keystore = try home.openKeystore()
        // Before anything else of the running serve's is touched (its agent socket), and
        // before a passphrase is asked for nothing.
        let lock = try ServeLock.acquire(keystore.home)
        defer { withExtendedLifetime(lock) {} }
        let identity = try keys.unlock(keystore)
        var confirmation: PeerServer.Confirm?
        if confirm {
            confirmation = { @Sendable question in askToStore(question) }
        }
        let pairingWindow = TimeInterval(self.pairingWindow)
        let pairingSetup: (window: TimeInterval, confirm: Pairing.Confirm)? = pairing
            ? (pairingWindow, { @Sendable code, card, label in confirmPairing(code: code, card: card, label: label, keystore: keystore) })
            : nil
        let queue = ReleaseConsent.queue(keystore: keystore, window: TimeInterval(consentTimeout))
        let server = PeerServer(keystore: keystore, identity: identity, confirm: confirmation, pairing: pairingSetup,
                                approvals: queue.lan, announce: { queue.announce($0) }) { line in
            Terminal.standardError("vault serve: \(line)")
        }
        let responder = ResponderBox()
        // A server on loopback only is reachable from this machine alone: announcing it on
        // the network would advertise an address nobody else can use.
        let loopbackOnly = listen.hasPrefix("127.") || listen == "::1" || listen == "localhost"
        let announce = !noMdns && !loopbackOnly, listen = self.listen
        if !noMdns && loopbackOnly { Terminal.standardError("vault serve: not announced by mDNS: listening on loopback only") }
        let agent = KeyAgent(approvals: queue, recoverer: { job in await ServeRecovery.run(job, keystore: keystore, identity: identity) }) { line in
            Terminal.standardError("vault serve: \(line)")
        }
        // The relays of the user's groups: share offers, piece requests and answers as they
        // come, and the answers of what is decided here.
        let watch = HolderWatch(keystore: keystore, identity: identity) { pass in
            for name in pass.groups { Terminal.standardError("vault serve: accepted group '\(TerminalText.escaped(name))'") }
            for message in pass.waitingForRecord { Terminal.standardError("vault serve: " + HolderWords.unlisted(message)) }
            var said: [HolderReport.Event] = []
            for event in pass.events {
                if case .queued(let request) = event { ReleaseConsent.ask(request, queue: queue) } else { said.append(event) }
            }
            for line in HolderWords.lines(said) { Terminal.standardError("vault serve: " + line) }
            for problem in pass.problems { Terminal.standardError("vault serve: \(problem)") }
        }
        queue.onRelayDecision { watch.wake() }
        let agentPath = KeyAgent.socketPath(keystore.home)
        let task = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await agent.run(path: agentPath) { Terminal.standardError("vault serve: agent listening on \(agentPath)") }
                }
                // It returns only once cancelled, with the others.
                group.addTask { await watch.run() }
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
        stop.attach(task)
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
            throw CLIError.invalidInput("cannot serve on \(listen):\(port): \(NetError.reason(of: error) ?? Report.words(for: error))")
        }
        Terminal.standardError("vault serve: stopped")
    }
}

/// Asks on the terminal; no terminal means no, and the sender is told.
@Sendable func askToStore(_ question: String) -> Bool {
    (try? Terminal.confirm(question, what: "storing a share")) ?? false
}
