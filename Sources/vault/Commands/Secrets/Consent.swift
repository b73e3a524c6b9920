import ArgumentParser
import Foundation
import VaultCore
import VaultNet

/// `vault requests`: the piece requests waiting for your consent in `vault serve`.
struct Requests: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the piece requests that wait for your consent in 'vault serve'.",
        discussion: """
            A holder's 'vault serve' releases a piece only when you approve the request ('vault \
            approve ID') or you chose automatic release for that peer ('vault secrets \
            auto-release'). Each request waits \(Int(NetLimits.approvalSeconds)) s.
            """)

    @OptionGroup var home: HomeOption

    @Flag(help: "Print JSON.")
    var json = false

    func run() async throws {
        guard let agent = await AgentClient.connect(home: home.vaultHome) else { throw CLIError.noAgent }
        let requests = try await agent.requests()
        if json { return try printJSON(requests) }
        guard !requests.isEmpty else { return Terminal.standardError("no requests wait for your consent") }
        let time = DateFormatter()
        time.dateFormat = "HH:mm:ss"
        for request in requests {
            let left = max(0, Int(request.expires.timeIntervalSinceNow))
            print("\(request.id)  \(time.string(from: request.asked))  '\(TerminalText.escaped(request.peer))' asks for piece \(request.holder) of "
                + "\(request.type) \(request.secretID.prefix(16))"
                + (request.description.isEmpty ? "" : " (\(TerminalText.escaped(request.description)))") + "  \(left) s left")
        }
    }
}

/// `vault approve ID` and `vault deny ID`.
struct Approve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Approve a waiting piece request: your piece goes to that peer once.")

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The request's id, or at least 4 of its first hex digits ('vault requests' lists them).", valueName: "id"))
    var id: String

    func run() async throws { try await decide(id, approve: true, home: home) }
}

struct Deny: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Deny a waiting piece request.")

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The request's id, or at least 4 of its first hex digits.", valueName: "id"))
    var id: String

    func run() async throws { try await decide(id, approve: false, home: home) }
}

private func decide(_ id: String, approve: Bool, home: HomeOption) async throws {
    guard let agent = await AgentClient.connect(home: home.vaultHome) else { throw CLIError.noAgent }
    guard let decided = try await agent.decide(id, approve: approve) else {
        throw CLIError.unavailable("no single waiting request matches \(TerminalText.escaped(id))",
                                   hint: "'vault requests' lists the waiting requests; a request waits \(Int(NetLimits.approvalSeconds)) s")
    }
    Terminal.standardError(approve ? "approved request \(decided): the piece goes out when the peer asks again (within seconds)"
                                   : "denied request \(decided)")
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

    @Argument(help: ArgumentHelp("The secret's name or id; leave out for every secret.", valueName: "id"))
    var secret: String?

    @Option(name: .customLong("for"), help: ArgumentHelp("The trusted peer.", valueName: "label"))
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
