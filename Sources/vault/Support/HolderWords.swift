import Foundation
import VaultCore
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
        case .answer(.delivery(let label, let state)):
            "'\(TerminalText.escaped(label))': share \(state.rawValue)"
        case .answer(.refused(let words)):
            "refused \(words)"
        }
    }
}

/// Where one holder asked through relays stands, as the requester sees it.
enum AskWords {
    static func state(_ state: Recovery.Ask.State, detail: String?, until: Date? = nil) -> String {
        switch state {
        case .asked: "asked through relays, no answer yet"
        case .waiting: "waiting for its person to approve" + (until.map { " (until \(DateWords.short($0)))" } ?? "")
        case .released: "piece received"
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
}
