import ArgumentParser
import Foundation
import VaultCore
import VaultHolders
import VaultNet
import VaultRelayClient

/// `vault secrets emergency`: the dealer's emergency rule of a secret.
struct SecretsEmergency: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "emergency",
        abstract: "Let a trusted person recover a secret you dealt after a wait you can cut short, or stop it.",
        discussion: """
            With --for and --after, names one trusted peer (the trustee) who may recover the \
            secret without a share of it: when the trustee runs 'vault recover ID --dealer YOU \
            --from HOLDERS', each holder that took the role waits, on its own clock, and then \
            releases its piece, unless you deny the request first. Holders tell you at once: \
            your 'vault serve', 'vault receive' and 'vault requests' show the request and when \
            it completes; 'vault deny ID' (from any of your machines with this identity) \
            cancels it at every holder, 'vault approve ID' ends the wait. The rule is signed by \
            you and delivered to each holder (over the LAN where its serve answers, else through \
            the relays of a group you share), whose person is asked to take the role. A new \
            rule replaces the old one; --off withdraws it. Without options, shows the rule and \
            each holder's answer.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The secret's name or id.", valueName: "id"), completion: Completions.secret)
    var secret: String

    @Option(name: .customLong("for"), help: ArgumentHelp("The trusted peer who may recover it.", valueName: "label"), completion: Completions.peer)
    var trustee: String?

    @Option(help: ArgumentHelp("How long each holder waits for your denial: 1s to 90d, e.g. 7d.", valueName: "wait"))
    var after: String?

    @Flag(help: "Withdraw the rule: nobody recovers the secret without the holders' consent.")
    var off = false

    @Option(help: ArgumentHelp("Deliver through this group's relays, even to holders whose serve answers on the LAN.", valueName: "group"),
            completion: Completions.group)
    var group: String?

    @OptionGroup var reach: PeerAddressOptions

    func validate() throws {
        if off && (trustee != nil || after != nil) { throw ValidationError("--off excludes --for and --after") }
        if (trustee == nil) != (after == nil) { throw ValidationError("--for and --after go together") }
        if let after { _ = try EmergencyChoice.wait(after, option: "--after") }
    }

    func run() async throws {
        let keystore = try home.openKeystore()
        let secret = try keystore.secret(matching: self.secret)
        guard trustee != nil || off else {
            let lines = try EmergencyLines.lines(for: secret, keystore: keystore)
            guard !lines.isEmpty else {
                return Terminal.standardError("no emergency rule for \(secret.header.secretIDHex.prefix(16))")
            }
            return lines.forEach { print($0) }
        }
        guard secret.role == .dealer else {
            throw CLIError.unavailable("only the secret's dealer sets its emergency rule",
                                       hint: "'vault secrets show \(secret.header.secretIDHex.prefix(16))' shows the rule its dealer set, and your role")
        }
        let peer = try trustee.map { try keystore.peer(named: $0) }
        let wait = try after.map { try EmergencyChoice.wait($0, option: "--after") } ?? 0
        let holders = try keystore.peers().filter { peer in
            guard let index = secret.header.index(of: peer.card.agreementKey) else { return false }
            return index != secret.header.holderIndex
        }
        let addresses = group == nil ? try await reach.addresses(for: holders, discovering: holders) : [:]
        let identity = try keys.unlock(keystore)
        let missed = try await EmergencyDelivery.set(trustee: peer, wait: wait, secret: secret, holders: holders, addresses: addresses,
                                                     route: group.map { .group($0) } ?? .auto, keystore: keystore, identity: identity)
        guard missed.isEmpty else {
            throw CLIError.unavailable("the emergency rule did not reach \(missed.joined(separator: ", "))",
                                       hint: "run this command again once they can be reached (their serve on the LAN, or a group you share)")
        }
    }
}

/// A secret's emergency rule, as `vault secrets show` and `vault secrets emergency` list it.
enum EmergencyLines {
    static func lines(for secret: StoredSecret, keystore: Keystore) throws -> [String] {
        guard let info = try EmergencyJSON(secret, keystore: keystore) else { return [] }
        var lines: [String] = []
        let trustee = "'\(TerminalText.escaped(info.trustee ?? "?"))'"
        let wait = DurationText.text(info.wait)
        switch info.role {
        case "dealt" where info.wait == 0:
            lines.append("off (set \(DateWords.short(info.issued)))")
        case "dealt":
            lines.append("\(trustee) may recover it \(wait) after asking, unless you deny (set \(DateWords.short(info.issued)))")
        case "off":
            lines.append("'\(TerminalText.escaped(info.dealer))' turned it off (\(DateWords.short(info.issued)))")
        default:
            let role = ["offered": "you are asked to take the role ('vault requests')", "accepted": "you took the role",
                        "declined": "you declined the role"][info.role] ?? info.role
            lines.append("'\(TerminalText.escaped(info.dealer))' names \(trustee), after \(wait): \(role)")
        }
        for holder in info.holders {
            lines.append("  \(TerminalText.escaped(holder.label)): role \(holder.state) (\(holder.via))")
        }
        for request in info.requests {
            let decided = request.decision.map { ", you \($0) it" } ?? ""
            lines.append("  request \(request.id) from '\(TerminalText.escaped(request.trustee))' (asked \(DateWords.release(request.asked)))\(decided):")
            for holder in request.holders {
                let when = holder.state == "waiting" ? ", releases \(DateWords.release(holder.releaseAt))" : ""
                lines.append("    \(TerminalText.escaped(holder.label)): \(holder.state)\(when)"
                             + (request.decision != nil ? (holder.decisionSent ? "; your decision sent" : "; your decision not yet sent") : ""))
            }
        }
        return lines
    }
}

/// A secret's emergency rule, in `vault secrets show --json`.
struct EmergencyJSON: Encodable {
    /// dealt (yours), offered, accepted, declined or off.
    let role: String
    let dealer: String
    let trustee: String?
    /// Seconds; 0 when off.
    let wait: UInt64
    let issued: Date
    /// For the dealer: each holder's answer.
    let holders: [Role]
    /// For the dealer: the emergency requests its holders told of.
    let requests: [Request]

    struct Role: Encodable {
        let label: String
        let state: String
        let via: String
    }

    struct Request: Encodable {
        let id: String
        let trustee: String
        /// When you first heard of it, and when the trustee asked (the first holder's receipt).
        let firstSeen: Date
        let asked: Date
        let decision: String?
        let holders: [Holder]
    }

    struct Holder: Encodable {
        let label: String
        let state: String
        let receivedAt: Date?
        let releaseAt: Date?
        let decisionSent: Bool
    }

    init?(_ secret: StoredSecret, keystore: Keystore) throws {
        let row = secret.header.rowID
        let watches = try keystore.emergencyWatches(secretRow: row)
        guard let stored = try keystore.emergencyRule(secretRow: row) else { return nil }
        let peers = try keystore.peers()
        func label(_ card: KeyCard) -> String { peers.first { $0.card == card }?.label.value ?? card.fingerprint }
        role = stored.role.rawValue
        dealer = stored.role == .dealt ? "you" : label(stored.rule.dealer)
        trustee = stored.rule.isOff ? nil : label(stored.rule.trustee)
        wait = stored.rule.wait
        issued = Date(timeIntervalSince1970: TimeInterval(stored.rule.issued))
        holders = try keystore.emergencyRoles(secretRow: row).filter { $0.issued == stored.rule.issued }
            .map { Role(label: $0.holderLabel, state: $0.state.rawValue, via: $0.via) }
        requests = watches.map { watch in
            Request(id: watch.id, trustee: watch.trusteeLabel, firstSeen: watch.firstSeen, asked: watch.asked, decision: watch.decision?.rawValue,
                    holders: watch.holders.map { Holder(label: $0.label, state: $0.state.rawValue, receivedAt: $0.received,
                                                        releaseAt: $0.releaseAt, decisionSent: $0.decisionSent) })
        }
    }
}
