import Foundation
import VaultCore
import VaultHolders
import VaultRelayClient

/// The end of a command that took holder messages (`vault receive`): what came is said,
/// what waits for consent is asked on the terminal, and the answers of what is decided go
/// out through the relays.
enum HolderRun {
    static func finish(_ report: inout HolderReport, keystore: Keystore, identity: Identity) async {
        let queue = ConsentQueue(keystore: keystore, lan: ReleaseApprovals())
        for event in report.events {
            guard case .queued(let request) = event else {
                Terminal.standardError(HolderWords.line(event))
                continue
            }
            Terminal.standardError(RequestWords.logLine(request))
            // Asked here when there is a terminal; otherwise it waits for 'vault approve'.
            guard Terminal.isAvailable, let yes = try? Terminal.confirm(RequestWords.question(request), details: RequestWords.warnings(request),
                                                                         what: "consent", retype: RequestWords.confirmation(request),
                                                                         while: { queue.isWaiting(request.id) }) ?? nil
            else { continue }
            if let decided = queue.decide(request.id, approve: yes) {
                Terminal.standardError("\(yes ? "approved" : "denied") request \(decided.id)")
            }
        }
        for problem in report.problems { Terminal.standardError("vault: warning: \(problem)") }
        for message in report.waitingForRecord { Terminal.standardError(HolderWords.unlisted(message)) }
        var answers = HolderReport()
        await HolderMail.answerDecided(keystore: keystore, identity: identity, round: report.round, report: &answers)
        for line in HolderWords.lines(answers.events) { Terminal.standardError(line) }
        for problem in answers.problems { Terminal.standardError("vault: warning: \(problem)") }
    }
}
