import ArgumentParser
import Foundation
import VaultCore
import VaultNet
import VaultRelayClient

/// `vault requests`: what waits for your consent: piece requests over the LAN (in `vault
/// serve`) and through relays, and share offers through relays.
struct Requests: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the piece requests and share offers that wait for your consent.",
        discussion: """
            A holder releases a piece only when you approve the request ('vault approve ID') or \
            you chose automatic release for that peer ('vault secrets auto-release'). Requests \
            over the LAN wait in 'vault serve' (\(Int(NetLimits.approvalSeconds)) s by default); \
            requests and share offers that came through relays wait in the keystore until they \
            expire, and are listed with or without a running serve. So are emergency roles \
            offered by a dealer, emergency requests waiting here (released when their wait ends \
            unless the dealer or you deny them), and, for a dealer, the emergency requests its \
            holders told of, which 'vault deny ID' cancels at every holder and 'vault approve ID' \
            releases at once.
            """)

    @OptionGroup var home: HomeOption

    @Flag(help: "Print JSON.")
    var json = false

    func run() async throws {
        let (requests, serving) = try await ConsentAccess.waiting(home: home)
        if json { return try printJSON(requests) }
        guard !requests.isEmpty else {
            return Terminal.standardError("no requests wait for your consent" + (serving ? "" : " (no 'vault serve' runs: requests over the LAN need one)"))
        }
        let time = DateFormatter()
        time.dateFormat = "HH:mm:ss"
        for request in requests {
            let left = max(0, Int(request.expires.timeIntervalSinceNow))
            // An emergency request's line says when it releases: nothing expires.
            let tail = request.releaseAt != nil ? "" : "  " + (left > 3600 ? "until \(DateWords.short(request.expires))" : "\(left) s left")
            print("\(request.id)  \(time.string(from: request.asked))  \(RequestWords.summary(request))" + tail)
        }
    }
}

/// `vault approve ID` and `vault deny ID`.
struct Approve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Approve a waiting request: your piece goes to that peer once, or the offered share is kept.")

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The request's id, or at least 4 of its first hex digits ('vault requests' lists them).", valueName: "id"))
    var id: String

    func run() async throws { try await ConsentAccess.decide(id, approve: true, home: home, keys: keys) }
}

struct Deny: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Deny a waiting request.")

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The request's id, or at least 4 of its first hex digits.", valueName: "id"))
    var id: String

    func run() async throws { try await ConsentAccess.decide(id, approve: false, home: home, keys: keys) }
}

/// The consent queue from the command line: through the running serve's agent, which holds
/// the LAN's requests and answers the relays' at once; without a serve, the requests through
/// relays in the keystore, answered by the command itself.
enum ConsentAccess {
    /// What waits, and whether a serve answered.
    static func waiting(home: HomeOption) async throws -> ([ReleaseApprovals.Request], serving: Bool) {
        if let agent = await AgentClient.connect(home: home.vaultHome) { return (try await agent.requests(), true) }
        let keystore = try home.openKeystore()
        return (ConsentQueue(keystore: keystore, lan: ReleaseApprovals()).waiting(), false)
    }

    static func decide(_ id: String, approve: Bool, home: HomeOption, keys: PassphraseOption) async throws {
        let keystore = try home.openKeystore()
        // Only the dealer ends an emergency wait early: a holder would release behind the
        // owner's back, which the rule's wait exists to prevent.
        if approve, let wait = try keystore.emergencyWait(matching: id), let described = ConsentQueue.describe(wait, keystore: keystore) {
            throw CLIError.unavailable("request \(wait.id) is an emergency request: \(RequestWords.summary(described)); "
                                       + "only \(RequestWords.name(described.dealer)), the secret's dealer, can end the wait early",
                                       hint: "'vault deny \(wait.id)' refuses it")
        }
        if let agent = await AgentClient.connect(home: home.vaultHome) {
            let matched = try await agent.requests().filter { $0.id.hasPrefix(id.lowercased()) }
            guard let decided = try await agent.decide(id, approve: approve) else { throw unmatched(id) }
            if matched.count == 1, let request = matched.first, request.kind == "watch" {
                return Terminal.standardError(EmergencyText.decided(request, approve: approve))
            }
            return Terminal.standardError(approve ? "approved request \(decided): it is answered within seconds" : "denied request \(decided)")
        }
        // No serve: only requests through relays can be waiting; this command answers them.
        let queue = ConsentQueue(keystore: keystore, lan: ReleaseApprovals())
        guard let decided = queue.decide(id, approve: approve) else { throw unmatched(id) }
        Terminal.standardError(decided.kind == "watch" ? EmergencyText.decided(decided, approve: approve)
                               : "\(approve ? "approved" : "denied") request \(decided.id): \(RequestWords.summary(decided))")
        var report = HolderReport()
        await HolderMail.answerDecided(keystore: keystore, identity: try keys.unlock(keystore), report: &report)
        for event in report.events { Terminal.standardError(HolderWords.line(event)) }
        for problem in report.problems { Terminal.standardError("vault: warning: \(problem)") }
    }

    private static func unmatched(_ id: String) -> CLIError {
        CLIError.unavailable("no single waiting request matches \(TerminalText.escaped(id))",
                             hint: "'vault requests' lists the waiting requests; one over the LAN waits \(Int(NetLimits.approvalSeconds)) s")
    }
}

/// `vault secrets auto-release`: the explicit opt-in to release without asking.
struct SecretsAutoRelease: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "auto-release",
        abstract: "Release your piece to a peer without asking (for your own machines), or stop doing so.",
        discussion: """
            By default every piece request waits for your consent. With this, requests from \
            the peer for the secret (or, without a secret, for every secret you hold, now and \
            later) are answered at once. Whoever controls that peer's machine then needs nobody \
            here to collect your piece: choose it only for machines as safe as this one. \
            'vault secrets show' lists the choice and every release.
            """)

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The secret's name or id; leave out for every secret.", valueName: "id"), completion: Completions.secret)
    var secret: String?

    @Option(name: .customLong("for"), help: ArgumentHelp("The trusted peer.", valueName: "label"), completion: Completions.peer)
    var peer: String

    @Flag(help: "Stop releasing without asking.")
    var off = false

    func run() throws {
        let keystore = try home.openKeystore()
        let peer = try keystore.peer(named: self.peer)
        let secret = try self.secret.map { try keystore.secret(matching: $0) }
        let changed = try keystore.setAutoRelease(!off, secretID: secret?.header.secretID, peer: peer.card)
        let which = secret.map { "your piece of \($0.header.secretIDHex.prefix(16))" } ?? "your pieces of every secret"
        switch (off, changed) {
        case (false, true): Terminal.standardError("\(which) now go\(secret == nil ? "" : "es") to '\(peer.label)' without asking")
        case (false, false): Terminal.standardError("\(which) already went to '\(peer.label)' without asking")
        case (true, true): Terminal.standardError("requests from '\(peer.label)' for \(which) wait for your consent again")
        case (true, false): Terminal.standardError("\(which) did not go to '\(peer.label)' without asking")
        }
    }
}
