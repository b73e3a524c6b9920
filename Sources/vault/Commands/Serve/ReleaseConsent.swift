import Dispatch
import Foundation
import VaultCore
import VaultHolders
import VaultNet

/// How `vault serve` puts what waits for consent to its person (piece requests over the LAN
/// and through relays, share offers through relays): a line in its log naming the request,
/// and, when it runs on a terminal, a question there, one at a time, withdrawn if the
/// request is answered elsewhere first.
enum ReleaseConsent {
    /// One question on the terminal at a time: two prompts must never interleave.
    private static let prompts = DispatchQueue(label: "vault.serve.consent")

    /// The queue of a serve over `keystore`, LAN requests waiting `window` seconds.
    static func queue(keystore: Keystore, window: TimeInterval) -> ConsentQueue {
        let box = Box()
        let lan = ReleaseApprovals(window: window) { request in box.value.map { ask(request, queue: $0) } }
        let queue = ConsentQueue(keystore: keystore, lan: lan) { request in box.value.map { ask(request, queue: $0) } }
        box.value = queue
        return queue
    }

    /// Logs `request` and, on a terminal, asks about it.
    static func ask(_ request: ReleaseApprovals.Request, queue: ConsentQueue) {
        Terminal.standardError("vault serve: " + RequestWords.logLine(request))
        guard Terminal.isAvailable, RequestWords.asks(request) else { return }
        // Each request gets its own question, in the order they came. One answered
        // elsewhere (vault approve|deny), or lapsed, is not asked, or is withdrawn while it
        // waits, so that the next answer typed goes to the next question.
        prompts.async {
            let open = { queue.waiting().contains { $0.id == request.id } }
            let answer = try? Terminal.confirm(RequestWords.question(request), details: RequestWords.warnings(request),
                                               what: request.kind == "share" ? "storing a share" : request.kind == "role" ? "taking the role" : "releasing a piece",
                                               retype: RequestWords.confirmation(request), while: open)
            guard let yes = answer ?? nil else { return }
            if queue.decide(request.id, approve: yes) != nil {
                Terminal.standardError("vault serve: \(yes ? "approved" : "denied") request \(request.id)")
            }
        }
    }

    /// Lets the callbacks reach the queue they belong to.
    private final class Box: @unchecked Sendable {
        weak var value: ConsentQueue?
    }
}

/// How a request for consent is told, the same in serve's log, its questions, `vault
/// requests` and `vault receive`.
enum RequestWords {
    /// `release request ID: 'alice' asks for piece 2 of note 1a2b… (the safe), relays of team; approve with 'vault approve ID' within 120 s`
    static func logLine(_ request: ReleaseApprovals.Request) -> String {
        let left = Int(request.expires.timeIntervalSince(request.asked).rounded())
        // Seconds for a request over the LAN; a date for one through relays, which waits days.
        let until = left < 3600 ? "within \(left) s" : "by \(DateWords.short(request.expires))"
        switch request.kind {
        case "role":
            return "emergency role \(request.id): \(summary(request)); take it with 'vault approve \(request.id)' "
                + "or decline it with 'vault deny \(request.id)' \(until)"
        case "emergency":
            return "emergency request \(request.id): \(summary(request)); 'vault deny \(request.id)' refuses it"
        case "watch":
            return "emergency request \(request.id): \(summary(request)): deny it with 'vault deny \(request.id)', "
                + "or release now with 'vault approve \(request.id)'"
        default:
            return "\(request.kind == "share" ? "share offer" : "release request") \(request.id): \(summary(request)); "
                + "approve with 'vault approve \(request.id)' \(until)"
        }
    }

    /// Who asks for what, and how it came.
    static func summary(_ request: ReleaseApprovals.Request) -> String {
        let peer = "'\(TerminalText.escaped(request.peer))'"
        let about = request.description.isEmpty ? "" : " (\(TerminalText.escaped(request.description)))"
        let via = request.via == "LAN" ? "" : ", \(request.via)"
        switch request.kind {
        case "share":
            return "\(peer) offers you share \(request.holder) of \(request.type) \(request.secretID.prefix(16))\(about), "
                + "\(request.threshold) of \(request.count) needed\(via)"
        case "role":
            let dealer = name(request.dealer ?? request.peer), trustee = name(request.trustee)
            return "\(dealer) names \(trustee) for emergency access to \(secret(request)): your piece of \(request.type) "
                + "\(request.secretID.prefix(16)) goes to \(trustee) \(DurationText.text(request.wait ?? 0)) after \(trustee) asks, "
                + "unless \(dealer) denies\(via)"
        case "emergency":
            return "\(name(request.peer)) asks for emergency access to \(secret(request)) as \(name(request.dealer)) allowed; "
                + "released on \(DateWords.release(request.releaseAt)) unless \(name(request.dealer)) denies"
        case "watch":
            let through = (request.through ?? []).map(name).joined(separator: ", ")
            return "\(name(request.trustee ?? request.peer)) asks for emergency access to \(secret(request))"
                + (through.isEmpty ? "" : " through \(through)") + "; released on \(DateWords.release(request.releaseAt)) unless you deny"
        default:
            // A requester that holds no share is someone else than the secret's dealer
            // claiming to be its new machine: whose secret it is must be said.
            guard request.holdsNoShare else {
                return "\(peer) asks for piece \(request.holder) of \(request.type) \(request.secretID.prefix(16))\(about)\(via)"
            }
            let dealer = name(request.dealer)
            return "\(peer) asks for piece \(request.holder) of \(dealer)'s \(request.type) \(request.secretID.prefix(16))\(about)\(via) "
                + "[holds no share; not \(dealer)'s card]"
        }
    }

    /// The question put on a terminal.
    static func question(_ request: ReleaseApprovals.Request) -> String {
        let peer = "'\(TerminalText.escaped(request.peer))'"
        switch request.kind {
        case "share":
            return "Keep share \(request.holder) of \(request.type) \(request.secretID.prefix(16)) for \(peer) (request \(request.id))?"
        case "role":
            let trustee = name(request.trustee)
            return "Take the emergency role for \(secret(request)): release your piece to \(trustee) \(DurationText.text(request.wait ?? 0)) "
                + "after \(trustee) asks, unless \(name(request.dealer ?? request.peer)) denies (request \(request.id))?"
        default:
            return "Release your piece of \(request.secretID.prefix(16)) to \(peer) (request \(request.id))?"
        }
    }

    /// What must be said before asking: a requester that holds no share proves nothing, and
    /// is not the card that dealt the secret.
    static func warnings(_ request: ReleaseApprovals.Request) -> [String] {
        guard request.holdsNoShare, request.kind == "piece" else { return [] }
        let peer = "'\(TerminalText.escaped(request.peer))'", dealer = name(request.dealer)
        return ["vault: warning: \(peer) holds no share of \(dealer)'s secret and is not \(dealer)'s card: it claims to be \(dealer)'s new machine",
                "vault: warning: fingerprints: \(peer) \(request.peerFingerprint ?? "?"); \(dealer) \(request.dealerFingerprint ?? "?")",
                "vault: warning: approve only if you checked face to face that \(peer) is \(dealer)'s (a new machine, its card exchanged in person)"]
    }

    /// What the person must type after a yes, for a request that holds no share: the
    /// dealer's label (a second, deliberate step; a reflexive "y" releases nothing).
    static func confirmation(_ request: ReleaseApprovals.Request) -> String? {
        guard request.holdsNoShare, request.kind == "piece" else { return nil }
        return request.dealer ?? request.dealerFingerprint
    }

    /// Whether a request is put to its person as a question: an emergency request is
    /// released when its wait ends, and a dealer's is denied or approved by command.
    static func asks(_ request: ReleaseApprovals.Request) -> Bool {
        request.kind != "emergency" && request.kind != "watch"
    }

    /// A secret as the emergency lines name it: its name here, else its public
    /// description, quoted; else its type and id.
    static func secret(_ request: ReleaseApprovals.Request) -> String {
        if let name = request.name { return "'\(TerminalText.escaped(name))'" }
        if !request.description.isEmpty { return "'\(TerminalText.escaped(request.description))'" }
        return "\(request.type) \(request.secretID.prefix(16))"
    }

    /// A person in an emergency line, as the issue's wording has it: the label bare.
    static func name(_ label: String?) -> String { TerminalText.escaped(label ?? "?") }
}
