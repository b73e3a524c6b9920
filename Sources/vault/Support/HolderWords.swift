import Foundation
import VaultCore
import VaultHolders
import VaultRelayClient

/// What holders said to each other through relays, in the words every command uses.
enum HolderWords {
    static func line(_ event: HolderReport.Event) -> String {
        switch event {
        case .queued(let request):
            RequestWords.logLine(request)
        case .releasedAutomatically(let label, let secret):
            "released your piece of \(secret.prefix(16)) to '\(TerminalText.escaped(label))' through relays (automatic release)"
        case .refusedRequest(let label, let reason):
            "refused a piece request from '\(TerminalText.escaped(label))': \(reason)"
        case .refusedOffer(let label, let reason):
            "refused a share offered by '\(TerminalText.escaped(label))': \(reason)"
        case .answered(let label, let what):
            "answered '\(TerminalText.escaped(label))' about its \(what)"
        case .answer(.ask(let label, let state, let detail)):
            "'\(TerminalText.escaped(label))': " + AskWords.state(state, detail: detail)
        case .answer(.delivery(let label, let secret, let state)):
            "'\(TerminalText.escaped(label))': share of \(secret.prefix(16)) \(state.rawValue)"
        case .answer(.refused(let words)):
            "refused \(words)"
        case .answer(.late(let label)):
            "'\(TerminalText.escaped(label))' answered a request of a recovery that has finished: nothing more to do"
        case .withdrawn(let label, let request):
            "'\(TerminalText.escaped(label))' withdrew request \(request): its recovery is over, and nothing is asked of you any more"
        case .emergencyWait(let request):
            RequestWords.logLine(request)
        case .ruleTaken(let label, let secret, .off):
            "'\(TerminalText.escaped(label))' turned off the emergency rule of \(secret.prefix(16))"
        case .ruleTaken(let label, let secret, let state):
            "'\(TerminalText.escaped(label))' renewed the emergency rule of \(secret.prefix(16)) (the same person, a wait no shorter): "
                + "your role stands (\(state))"
        case .refusedRule(let label, let reason):
            "refused an emergency rule from '\(TerminalText.escaped(label))': \(reason)"
        case .dealerDecision(let label, let trustee, let approves, let decided):
            "'\(TerminalText.escaped(label))' \(approves ? "approved" : "denied") \(TerminalText.escaped(trustee))'s emergency access: "
                + (decided == 0 ? "no request of it waits here" : approves ? "released now" : "cancelled here")
        case .decisionSent(let label, let trustee, let approves):
            "told '\(TerminalText.escaped(label))' that you \(approves ? "approved" : "denied") \(TerminalText.escaped(trustee))'s emergency access"
        case .answer(.role(let label, let state)):
            "'\(TerminalText.escaped(label))': emergency role \(state.rawValue)"
        case .answer(.emergency(let news)):
            news.new && news.state == .waiting
                ? news.described.map(RequestWords.logLine) ?? "'\(TerminalText.escaped(news.holder))': \(EmergencyText.state(news))"
                : "'\(TerminalText.escaped(news.holder))': \(EmergencyText.state(news))"
        }
    }
}

extension HolderWords {
    /// The lines of `events`, each as ``line(_:)`` says it, but a dealer's decision sent to
    /// several holders is one line naming them all.
    static func lines(_ events: [HolderReport.Event]) -> [String] {
        var lines: [String] = [], told: [String: [String]] = [:], order: [String] = []
        for event in events {
            guard case .decisionSent(let holder, let trustee, let approves) = event else {
                lines.append(line(event))
                continue
            }
            let said = "that you \(approves ? "approved" : "denied") \(TerminalText.escaped(trustee))'s emergency access"
            if told[said] == nil { order.append(said) }
            let name = "'\(TerminalText.escaped(holder))'"
            if !(told[said]?.contains(name) ?? false) { told[said, default: []].append(name) }
        }
        return lines + order.map { "told \(told[$0]!.joined(separator: ", ")) \($0)" }
    }

    /// A holder message whose sender the record of its group held here does not name yet.
    static func unlisted(_ message: HolderReport.Unlisted) -> String {
        "a holder message in \(TerminalText.escaped(message.group)) from \(message.sender), whom this machine's record of the group "
            + "does not list yet: left on the relays, and taken once a newer record of the group names its sender"
    }
}

/// Emergency access as its dealer reads it.
enum EmergencyText {
    /// What a dealer's decision did.
    static func decided(_ request: ReleaseApprovals.Request, approve: Bool) -> String {
        let trustee = RequestWords.name(request.trustee ?? request.peer)
        return approve
            ? "approved \(trustee)'s emergency access to \(RequestWords.secret(request)) (request \(request.id)): every holder is told to release now"
            : "denied \(trustee)'s emergency access to \(RequestWords.secret(request)) (request \(request.id)): every holder is told to cancel it"
    }

    /// Where a trustee's request stands at the holder that told.
    static func state(_ news: EmergencyDesk.News) -> String {
        let trustee = TerminalText.escaped(news.watch.trusteeLabel)
        return switch news.state {
        case .waiting: "\(trustee)'s emergency request \(news.watch.id) waits; released on \(DateWords.release(news.watch.releaseAt)) unless you deny"
        case .cancelled: "cancelled \(trustee)'s emergency request \(news.watch.id), as you denied"
        case .denied: "refused \(trustee)'s emergency request \(news.watch.id) itself"
        case .released: "released its piece to \(trustee) (emergency request \(news.watch.id))"
        case .replaced: "\(trustee) asked again: emergency request \(news.watch.id) was replaced by a newer one, which waits from its own start"
        }
    }
}

/// Where one holder asked through relays stands, as the requester sees it.
enum AskWords {
    static func state(_ state: Recovery.Ask.State, detail: String?, until: Date? = nil) -> String {
        switch state {
        case .asked: "asked through relays, no answer yet"
        case .waiting where detail == Recovery.Ask.emergencyDetail:
            "emergency access: released " + (until.map { "on \(DateWords.release($0))" } ?? "when its wait ends") + " unless the secret's dealer denies"
        case .waiting: "waiting for its person to approve" + (detail.map { " request \($0)" } ?? "")
            + (until.map { " (until \(DateWords.short($0)))" } ?? "")
        case .released: "piece received"
        case .denied where detail == Recovery.Ask.dealerDetail: "denied by the secret's dealer"
        case .denied: "denied"
        case .timedOut: "nobody approved in time"
        case .refused: "refused: \(detail ?? "a check failed")"
        case .failed: "its answer was refused here: \(detail ?? "a check failed")"
        }
    }
}

/// Dates as a person reads them on a terminal: local time, to the minute.
enum DateWords {
    static func short(_ date: Date) -> String {
        let format = DateFormatter()
        format.dateFormat = "yyyy-MM-dd HH:mm"
        return format.string(from: date)
    }

    /// An emergency wait's end: to the minute, or to the second when it is less than an
    /// hour away (a wait of seconds, as tests use).
    static func release(_ date: Date?) -> String {
        guard let date else { return "?" }
        guard abs(date.timeIntervalSince(VaultClock.now())) < 3600 else { return short(date) }
        let format = DateFormatter()
        format.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return format.string(from: date)
    }
}
