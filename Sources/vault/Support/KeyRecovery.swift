import ArgumentParser
import VaultCore
import VaultHolders
import VaultNet
import VaultRelayClient

/// Where a command that needs a shared key finds holders, when it must recover the key.
struct KeyRecoveryOptions: ParsableArguments {
    @OptionGroup var reach: PeerAddressOptions

    @Option(help: ArgumentHelp("Seconds to wait for holders when the key must be recovered (default: \(RecoveryWait.defaultSeconds), longer while a holder asks its person).",
                               valueName: "s"))
    var timeout: Int?

    @Option(help: ArgumentHelp("Read the shared key's password layer, if it has one, from the first line of this file.", valueName: "file"))
    var keyPasswordFile: String?

    /// Recovery as `identity`, reporting on the terminal.
    func recoverer(_ keystore: Keystore, identity: Identity) -> HolderRecovery {
        reach.recoverer(keystore, identity: identity, timeout: timeout)
    }

    /// Asks for `holding`'s password layer when recovery reaches it.
    func keyPassword(for holding: KeyHolding) -> () throws -> SecureBytes {
        layerPassword(file: keyPasswordFile, prompt: "Password for key '\(holding.displayName)': ")
    }

    @OptionGroup var relays: RelayRecoveryOptions


    /// Recovers `holding` as the keystore's identity (unlocked when it is needed): from
    /// holders on the LAN, then, for what they did not give, through the relays of your
    /// groups.
    func recoverKey(_ holding: KeyHolding, keystore: Keystore, keys: PassphraseOption) async throws -> SecureBytes {
        try checkNoDealer()
        return try await recoverKey(holding, keystore: keystore, identity: try keys.unlock(keystore), password: keyPassword(for: holding))
    }

    /// These options for a serve's agent to recover with (``ServeRecovery``).
    var agentOptions: AgentRecoveryOptions {
        AgentRecoveryOptions(peers: reach.peers, timeout: timeout, group: relays.group, wait: relays.wait, ttl: relays.ttl,
                             restart: relays.restart)
    }

    /// A key held here is recovered with its own share: there is no dealer to name.
    func checkNoDealer() throws {
        if relays.dealer != nil { throw CLIError.invalidInput("--dealer and --from are for 'vault recover' and 'vault reshare'") }
    }

    /// Recovers `holding` as `identity` (a serve's, for `vault unlock`), its password layer
    /// from `password` when it has one.
    /// `command` is what a hint says to run again (`vault unlock NAME`), when not the
    /// `vault recover` of the key's secret.
    func recoverKey(_ holding: KeyHolding, keystore: Keystore, identity: Identity, command: String? = nil, inServe: Bool = false,
                    password: @escaping () throws -> SecureBytes) async throws -> SecureBytes {
        defer { ProgressLine.end() }
        let recoverer = recoverer(keystore, identity: identity)
        let secret = holding.secret
        RecoveryReport.show(.recoveringKey(holding.displayName), timeout: timeout ?? RecoveryWait.defaultSeconds)
        let gathered = try await recoverer.gatherPieces(of: secret)
        ProgressLine.end()
        guard gathered.count < secret.header.threshold - 1, try !keystore.groups().isEmpty else {
            return try recoverer.combineKey(secret, pieces: gathered, password: password)
        }
        let target = RecoveryTarget(own: secret, dealer: secret.header.dealer, secretID: secret.header.secretID)
        let outcome = try await relays.recover(target, lanPieces: gathered.map(\.path), keystore: keystore, identity: identity, timeout: timeout,
                                               command: command, takingMail: !inServe)
        let key = try withExtendedLifetime(gathered) {
            try recoverer.combineKey(secret, pieceFiles: gathered.map(\.path) + outcome.pieces, replyKeys: [outcome.remote.replyKey],
                                     password: password)
        }
        await outcome.remote.complete()
        return key
    }
}

/// How long recovery waits for holders: `--timeout` bounds the whole wait; without it,
/// holders get a few seconds to answer, and one that asks its person for consent gets the
/// time that person has to answer.
enum RecoveryWait {
    static let defaultSeconds = 10
}

extension PeerAddressOptions {
    /// Recovery as `identity` from the holders these options reach, reporting on the terminal;
    /// `timeout` is the person's `--timeout`, if given.
    func recoverer(_ keystore: Keystore, identity: Identity, timeout given: Int?) -> HolderRecovery {
        let reach = self
        let timeout = given ?? RecoveryWait.defaultSeconds
        // Holders that a group of this identity's reaches are asked through relays next:
        // "use --peer" is no advice for them.
        let throughRelays = Set(((try? keystore.peers()) ?? []).filter { peer in
            (try? HolderMail.sharedGroup(with: peer.card, keystore: keystore, identity: identity)) != nil
        }.map(\.label.value))
        return HolderRecovery(keystore: keystore, identity: identity, timeout: timeout, strict: given != nil,
                              resolve: { peers, discovering, wait in try await reach.addresses(for: peers, discovering: discovering, timeout: wait) },
                              report: { RecoveryReport.show($0, timeout: timeout, throughRelays: throughRelays) })
    }
}

/// Recovery's progress on standard error.
enum RecoveryReport {
    static func show(_ event: HolderRecovery.Event, timeout: Int, throughRelays: Set<String> = []) {
        switch event {
        case .recoveringKey(let name):
            Terminal.standardError("recovering key '\(name)' from its holders")
        case .needed(let count, let holders):
            Terminal.standardError("need \(count) piece\(count == 1 ? "" : "s") besides yours; holders you trust: "
                + (holders.isEmpty ? "none" : holders.map { "\($0.label) (index \($0.index))" }.joined(separator: ", ")))
        case .unreachable(let label) where throughRelays.contains(label.value):
            Terminal.standardError("  \(label): not found nearby (asked through relays if the LAN does not give enough)")
        case .unreachable(let label):
            Terminal.standardError("  \(label): not found nearby and no address known (use --peer \(label)=HOST:PORT)")
        case .asking(let label, let address):
            Terminal.standardError("  asking \(label) at \(address)")
        case .transferring(let meters):
            ProgressLine.show("gathering pieces", meters)
        case .gathering(.waiting(let peer, let id, let seconds)):
            Terminal.standardError("  \(peer.label): waiting for \(peer.label) to approve request \(id) (up to \(seconds) s; "
                + "there: 'vault approve \(id)')")
        case .gathering(.received(let peer)):
            Terminal.standardError("  \(peer.label): piece received")
        case .gathering(.failed(let peer, let error)):
            Terminal.standardError("  \(peer.label): \(Report.words(for: error))")
        case .gathering(.timedOut):
            Terminal.standardError("  no more answers within \(timeout) s")
        case .gathering(.enough(let waiting)):
            Terminal.standardError("  enough pieces check out; not waiting for \(waiting) more")
        case .setAside(let index, let problem):
            Terminal.standardError("vault: warning: piece \(index) set aside, \(problem)")
        }
    }
}
