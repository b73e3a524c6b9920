import ArgumentParser
import Foundation
import VaultCore
import VaultHolders
import VaultRelayProtocol
import VaultRelayClient

/// What a recovery is of: a secret this identity holds a share of, or (a new machine of the
/// secret's owner) one it holds none of, named by its dealer and full id.
struct RecoveryTarget {
    let own: StoredSecret?
    let dealer: KeyCard
    let secretID: [UInt8]
}

/// Recovery through the relays of the user's groups, after the LAN (`vault recover`,
/// `vault unlock`): the options, and the run that asks the holders still needed and takes
/// their pieces.
struct RelayRecoveryOptions: ParsableArguments {
    @Option(help: ArgumentHelp("For a secret you hold no share of (a new machine): its dealer, by peer label or card.", valueName: "label"), completion: Completions.peer)
    var dealer: String?

    @Option(help: ArgumentHelp("For a secret you hold no share of: the holders to ask, comma-separated.", valueName: "labels"), completion: Completions.peers)
    var from: String?

    @Option(help: ArgumentHelp("Ask through this group's relays only.", valueName: "group"), completion: Completions.group)
    var group: String?

    @Flag(help: "Wait for the holders' answers through relays, showing each, instead of returning once they are asked.")
    var wait = false

    @Option(help: ArgumentHelp("How long requests through relays stay valid (e.g. 3d, 12h, 30m; at most 7d).", valueName: "duration"))
    var ttl: String = "3d"

    @Flag(help: "End the recovery through relays under way (its pieces too) and ask every holder anew.")
    var restart = false

    func validate() throws {
        if dealer != nil && from == nil { throw ValidationError("--dealer needs --from: the holders to ask") }
        if from != nil && dealer == nil { throw ValidationError("--from goes with --dealer, for a secret you hold no share of") }
        guard try Duration.seconds(ttl) <= RelayPieceRequest.maximumLifetime else { throw ValidationError("--ttl is at most 7d") }
    }

    /// The secret named by `text`: one held here, or with --dealer one held by others.
    /// A group named with --group is looked up here too, before anything is asked.
    func target(_ text: String, keystore: Keystore) throws -> RecoveryTarget {
        if let group { _ = try keystore.group(named: group) }
        guard let dealer else {
            let own = try keystore.secret(matching: text)
            return RecoveryTarget(own: own, dealer: own.header.dealer, secretID: own.header.secretID)
        }
        guard let id = [UInt8](hexID: text.lowercased()) else {
            // A name or short id of a secret held here: --dealer and --from are not for it.
            if let held = try? keystore.secret(matching: text) {
                throw CLIError.unavailable("you hold a share of \(TerminalText.escaped(text)) (\(held.header.secretIDHex.prefix(16))): "
                                           + "--dealer and --from are for a secret you hold no share of",
                                           hint: "'vault recover \(ShellWord.quoted(text))' asks its holders with your share")
            }
            throw CLIError.unavailable("a secret you hold no share of is named by its whole id: 32 hex digits",
                                       hint: "a holder's 'vault secrets show NAME' prints it")
        }
        // A label that names no peer is said to be one (a typo in a label is no damaged card).
        let card = if let peer = try? keystore.peer(named: dealer) {
            peer.card
        } else if KeyCard.isCardText(dealer) {
            try CardOffer(text: dealer).card
        } else {
            try keystore.peer(named: dealer).card
        }
        if let held = try keystore.secrets().first(where: { $0.header.rowID == BundleHeader.rowID(dealer: card, secretID: id) }) {
            return RecoveryTarget(own: held, dealer: card, secretID: id)
        }
        return RecoveryTarget(own: nil, dealer: card, secretID: id)
    }

    /// What the relays gave.
    struct Outcome {
        let remote: RemoteRecovery
        let pieces: [String]
        let header: BundleHeader?
    }

    /// Asks, through relays, each holder not asked before, takes what arrived, and, with
    /// --wait, waits for enough pieces; otherwise, without enough, stops saying how to come
    /// back. `lanPieces` came over the LAN already, from holders who are not asked again.
    /// `rerunWith` are the caller's own options that a hint's command to run again keeps.
    /// `command`, when given, is the command to run again (`vault unlock family`), in place
    /// of the `vault recover` this run would be.
    /// `takingMail` false: run inside a serve, whose watch takes what the relays hold.
    func recover(_ target: RecoveryTarget, lanPieces: [String], keystore: Keystore, identity: Identity, timeout: Int?,
                 rerunWith: [String] = [], command: String? = nil, takingMail: Bool = true) async throws -> Outcome {
        let again = { (target: RecoveryTarget) in
            (command.map { $0 + (self.group.map { " --group \(ShellWord.quoted($0))" } ?? "") } ?? self.again(target))
                + rerunWith.map { " " + ShellWord.quoted($0) }.joined()
        }
        let answered = Set(lanPieces.compactMap(ReleasedPiece.claimedSender(ofFile:)))
        let lanPieces = answered.count
        if restart, let running = try keystore.recovery(dealer: target.dealer, secretID: target.secretID) { try keystore.endRecovery(running) }
        let remote = try RemoteRecovery(dealer: target.dealer, secretID: target.secretID, own: target.own,
                                        lifetime: try Duration.seconds(ttl), keystore: keystore, identity: identity)
        show(await remote.collect(takingMail: takingMail))
        let holders = try holdersToAsk(target, keystore: keystore).filter { !answered.contains($0.card.agreementKey) }
        // A holder that refused for a reason time may mend is asked again: what it said comes
        // first, so that a refusal that will not mend (a wrong --dealer) is seen.
        let refusals = Dictionary(remote.recovery.asks.filter { $0.state == .refused }.map { ($0.holderLabel, $0) }, uniquingKeysWith: { a, _ in a })
        for outcome in await remote.ask(holders, group: group) {
            switch outcome {
            case .asked(let label, let group):
                let earlier = refusals[label].map { AskWords.state($0.state, detail: $0.detail) + "; " } ?? ""
                Terminal.standardError("  \(label): \(earlier)asked through " + (group.map { "the relays of \($0)" } ?? "your relays, as a guest (no group shared)"))
            case .before(let label, let state, let detail, let until):
                Terminal.standardError("  \(label): " + AskWords.state(state, detail: detail, until: until) + " (asked before)")
            case .unreachable(let label, let reason): Terminal.standardError("  \(label): not asked through relays: \(reason)")
            }
        }
        let deadline = timeout.map { Date().addingTimeInterval(TimeInterval($0)) } ?? remote.recovery.expires
        var seen = states(remote)
        while true {
            let (files, header) = try remote.released(excluding: answered)
            let needed = (header?.threshold ?? Int.max) - (target.own == nil ? 0 : 1)
            if files.count + lanPieces >= needed { return Outcome(remote: remote, pieces: files, header: header) }
            let pending = remote.recovery.asks.filter { $0.isPending }
            if remote.nothingMoreWillCome {
                let have = files.count + lanPieces + (target.own == nil ? 0 : 1)
                let unanswered = remote.recovery.asks.filter { $0.state != .released }
                // The threshold is known only from a piece's header: with none, say what each
                // holder answered rather than "0 needed". The hint is about relays, not the
                // LAN's "ask them to run 'vault serve'": each holder has answered already.
                let restart = "'\(again(target)) --restart' asks every holder anew"
                guard let header else {
                    throw CLIError.unavailable("no piece came through relays, and none will: "
                                               + unanswered.map { "\($0.holderLabel) " + AskWords.state($0.state, detail: $0.detail) }.joined(separator: "; "),
                                               hint: restart)
                }
                throw CLIError.unavailable(VaultError.tooFewPieces(have: have, need: header.threshold, missing: unanswered.map(\.holderLabel)).description,
                                           hint: "every holder asked has answered (the lines above say how); " + restart)
            }
            guard !remote.recovery.asks.isEmpty else {
                // Nothing under way to keep: the recovery this run began goes with it.
                remote.end()
                throw CLIError.unavailable("no holder could be asked through relays", hint: "the lines above say why for each holder")
            }
            guard wait else {
                throw CLIError.pending("\(files.count) of the pieces needed came through relays so far; waiting for "
                                       + pending.map(\.holderLabel).joined(separator: ", "),
                                       hint: "run '\(again(target))' again once they answer (or add --wait); the requests stay valid until \(DateWords.short(remote.recovery.expires))")
            }
            guard Date() < deadline else {
                throw CLIError.pending("time ran out with \(files.count) pieces through relays",
                                       hint: "run '\(again(target))' again later: the requests stay valid until \(DateWords.short(remote.recovery.expires))")
            }
            await remote.waitForAnswers(until: deadline)
            // Stopped (a serve's recovery whose command went away, or Ctrl-C): the wait then
            // returns at once, and the loop must not spin until the deadline.
            try Task.checkCancellation()
            show(await remote.collect(takingMail: takingMail))
            let now = states(remote)
            for ask in remote.recovery.asks where now[ask.holderLabel] != seen[ask.holderLabel] {
                Terminal.standardError("  \(ask.holderLabel): " + AskWords.state(ask.state, detail: ask.detail, until: ask.until))
            }
            seen = now
        }
    }

    /// The command that asks again: a secret held here by its short id; one held by others
    /// by its whole id (all a machine that holds no share of it takes), with the dealer and
    /// holders given.
    private func again(_ target: RecoveryTarget) -> String {
        let group = self.group.map { " --group \(ShellWord.quoted($0))" } ?? ""
        guard target.own == nil, let dealer, let from else { return "vault recover \(target.secretID.hex.prefix(16))\(group)" }
        return "vault recover \(target.secretID.hex) --dealer \(ShellWord.quoted(dealer)) --from \(ShellWord.quoted(from))\(group)"
    }

    /// The holders to ask: every trusted holder of the own share's secret but this one, or
    /// the --from peers.
    private func holdersToAsk(_ target: RecoveryTarget, keystore: Keystore) throws -> [Peer] {
        if let own = target.own {
            return try keystore.peers().filter {
                guard let index = own.header.index(of: $0.card.agreementKey) else { return false }
                return index != own.header.holderIndex
            }
        }
        let names = (from ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        return try names.map { try keystore.peer(named: $0) }
    }

    private func states(_ remote: RemoteRecovery) -> [String: String] {
        Dictionary(remote.recovery.asks.map { ($0.holderLabel, "\($0.state.rawValue)\($0.detail ?? "")") }, uniquingKeysWith: { a, _ in a })
    }

    /// Problems met on the way; answers show as state changes.
    private func show(_ report: HolderReport) {
        for event in report.events {
            if case .answer(.ask) = event { continue }
            Terminal.standardError(HolderWords.line(event))
        }
        for problem in report.problems { Terminal.standardError("vault: warning: \(problem)") }
    }
}

