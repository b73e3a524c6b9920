import ArgumentParser
import Foundation
import VaultCore
import VaultHolders
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
    @OptionGroup var keys: PassphraseOption

    @Flag(help: "Print JSON.")
    var json = false

    @Flag(help: "Do not read the relays, even when no serve does (list what is here only).")
    var noReceive = false

    func run() async throws {
        // Without a serve, nobody reads the relays: a dealer would not see an emergency
        // request until its next 'vault receive', and noticing in time is its safeguard.
        let read = noReceive ? nil : try await ConsentAccess.readRelaysUnlessServed(home: home, keys: keys)
        let (requests, serving) = try await ConsentAccess.waiting(home: home)
        if json { return try printJSON(requests) }
        guard !requests.isEmpty else {
            return Terminal.standardError("no requests wait for your consent"
                                          + (serving ? "" : " (no 'vault serve' runs: requests over the LAN need one" + (read.map { "; " + $0 } ?? "") + ")"))
        }
        if !serving, let read { Terminal.standardError(read) }
        let time = DateFormatter()
        time.dateFormat = "HH:mm:ss"
        for request in requests {
            let left = max(0, Int(request.expires.timeIntervalSince(VaultClock.now())))
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

    @Option(name: .customLong("confirm-dealer"),
            help: ArgumentHelp("For a request from someone who holds no share: the secret's dealer's label, typed as a second confirmation "
                               + "(asked on a terminal when left out).", valueName: "label"))
    var confirmDealer: String?

    func run() async throws { try await ConsentAccess.decide(id, approve: true, confirmDealer: confirmDealer, home: home, keys: keys) }
}

struct Deny: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Deny a waiting request, or every waiting request of a peer or about a secret.",
        discussion: """
            Names one request by its id (or at least 4 of its first hex digits); or, by a \
            peer's label, every request that peer makes here (for a dealer: every emergency \
            request with that peer as the trustee); or, by a secret's name or id, every \
            request about that secret. An id is tried first.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("A request's id (or at least 4 of its first hex digits), a peer's label, or a secret's name or id.",
                                 valueName: "id|peer|secret"))
    var id: String

    func run() async throws { try await ConsentAccess.deny(id, home: home, keys: keys) }
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

    /// How long `vault requests` reads the relays when no serve does.
    static let readDeadline: TimeInterval = 5

    /// Without a serve, reads what the relays hold (at most ``readDeadline`` seconds), when
    /// the keys open without asking (no passphrase, or one given in a file), and says when
    /// the relays were read; nil with a serve, which reads them itself.
    static func readRelaysUnlessServed(home: HomeOption, keys: PassphraseOption) async throws -> String? {
        if await AgentClient.connect(home: home.vaultHome) != nil { return nil }
        let keystore = try home.openKeystore()
        guard try !keystore.groups().isEmpty else { return nil }
        let info = try keystore.identityInfo()
        let opens = (!info.isPassphraseProtected || keys.passphraseFile != nil) && (!info.needsPIN || keys.pinFile != nil)
        func last() throws -> String {
            try keystore.relaysLastRead().map { "the relays were last read \(DateWords.short($0))" } ?? "the relays were never read here"
        }
        guard opens else {
            return try last() + "; not read now: your keys need your " + (info.needsPIN ? "PIN" : "passphrase")
                + " ('vault receive' reads them, or give --\(info.needsPIN ? "pin" : "passphrase")-file)"
        }
        let identity = try keys.unlock(keystore)
        guard let report = await HolderMail.collect(keystore: keystore, identity: identity, within: readDeadline) else {
            return try last() + "; reading them now took over \(Int(readDeadline)) s and was stopped"
        }
        // What came is said as receive says it; what waits is listed after.
        for event in report.events {
            if case .queued = event { continue }
            Terminal.standardError(HolderWords.line(event))
        }
        for problem in report.problems { Terminal.standardError("vault: warning: \(problem)") }
        return "the relays were read just now"
    }

    static func decide(_ id: String, approve: Bool, confirmDealer: String? = nil, home: HomeOption, keys: PassphraseOption) async throws {
        let keystore = try home.openKeystore()
        if approve { try await confirmOwner(of: id, typed: confirmDealer, home: home) }
        // Only the dealer ends an emergency wait early: a holder would release behind the
        // owner's back, which the rule's wait exists to prevent.
        if approve, let wait = try keystore.emergencyWait(matching: id), let described = ConsentQueue.describe(wait, keystore: keystore) {
            throw CLIError.unavailable("request \(wait.id) is an emergency request: \(RequestWords.summary(described)); "
                                       + "only \(RequestWords.name(described.dealer)), the secret's dealer, can end the wait early",
                                       hint: "'vault deny \(wait.id)' refuses it")
        }
        try await decide([id], approve: approve, keystore: keystore, keys: keys, home: home)
    }

    /// A request from someone who holds no share is approved only once the person also gave
    /// the dealer's label (`--confirm-dealer`, or typed on the terminal), after being told
    /// whose secret it is and whose card asks.
    private static func confirmOwner(of id: String, typed: String?, home: HomeOption) async throws {
        let matched = try await waiting(home: home).0.filter { $0.id.hasPrefix(id.lowercased()) }
        guard matched.count == 1, let request = matched.first, let word = RequestWords.confirmation(request) else { return }
        RequestWords.warnings(request).forEach(Terminal.standardError)
        let given: String
        if let typed {
            given = typed
        } else {
            guard Terminal.isAvailable else {
                throw CLIError.unavailable("request \(request.id) is from someone who holds no share: approving it needs the dealer's label as well",
                                           hint: "check it face to face, then add --confirm-dealer \(ShellWord.quoted(word))")
            }
            given = Terminal.ask("Type '\(TerminalText.escaped(word))' to confirm: ") ?? ""
        }
        guard Label.sameName(given.trimmingCharacters(in: .whitespaces), word) else {
            throw CLIError.unavailable("'\(TerminalText.escaped(given))' is not '\(TerminalText.escaped(word))', the secret's dealer: nothing approved",
                                       hint: "'vault approve \(request.id) --confirm-dealer \(ShellWord.quoted(word))' once you checked it is \(word)'s")
        }
    }

    /// Denies the request `word` names, or every request of the peer or secret it names.
    static func deny(_ word: String, home: HomeOption, keys: PassphraseOption) async throws {
        let keystore = try home.openKeystore()
        let (waiting, _) = try await waiting(home: home)
        let (matched, naming) = ConsentQueue.requests(named: word, in: waiting, keystore: keystore)
        switch naming {
        case .id, .nothing:
            try await decide([word], approve: false, keystore: keystore, keys: keys, home: home)
        case .peer(let label), .secret(let label):
            let what = naming == .peer(label) ? "'\(TerminalText.escaped(label))'" : "secret \(TerminalText.escaped(label))"
            guard !matched.isEmpty else {
                throw CLIError.unavailable("no request of \(what) waits for your consent", hint: "'vault requests' lists the waiting requests")
            }
            try await decide(matched.map(\.id), approve: false, keystore: keystore, keys: keys, home: home)
        }
    }

    /// Decides each request of `ids` (each at least a unique prefix), then answers through
    /// the relays, once, what no serve answers.
    private static func decide(_ ids: [String], approve: Bool, keystore: Keystore, keys: PassphraseOption, home: HomeOption) async throws {
        if let agent = await AgentClient.connect(home: home.vaultHome) {
            let listed = try await agent.requests()
            for id in ids {
                let matched = listed.filter { $0.id.hasPrefix(id.lowercased()) }
                guard let decided = try await agent.decide(id, approve: approve) else { throw unmatched(id) }
                if matched.count == 1, let request = matched.first, request.kind == "watch" {
                    Terminal.standardError(EmergencyText.decided(request, approve: approve))
                } else {
                    Terminal.standardError(approve ? "approved request \(decided): it is answered within seconds" : "denied request \(decided)")
                }
            }
            return
        }
        // No serve: only requests through relays can be waiting; this command answers them.
        let queue = ConsentQueue(keystore: keystore, lan: ReleaseApprovals())
        for id in ids {
            guard let decided = queue.decide(id, approve: approve) else { throw unmatched(id) }
            Terminal.standardError(decided.kind == "watch" ? EmergencyText.decided(decided, approve: approve)
                                   : "\(approve ? "approved" : "denied") request \(decided.id): \(RequestWords.summary(decided))")
        }
        var report = HolderReport()
        // The relays were not read: an emergency wait that ended waits for the next receive.
        await HolderMail.answerDecided(keystore: keystore, identity: try keys.unlock(keystore), round: nil, report: &report)
        for line in HolderWords.lines(report.events) { Terminal.standardError(line) }
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
