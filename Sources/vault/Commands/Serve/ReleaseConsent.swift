import Dispatch
import Foundation
import VaultCore
import VaultNet

/// How `vault serve` puts piece requests to its person: a line in its log naming the
/// request, and, when it runs on a terminal, a question there, one at a time, withdrawn if
/// the request is answered elsewhere first.
enum ReleaseConsent {
    /// One question on the terminal at a time: two prompts must never interleave.
    private static let prompts = DispatchQueue(label: "vault.serve.consent")

    static func approvals(window: TimeInterval) -> ReleaseApprovals {
        let approvals = Box()
        let made = ReleaseApprovals(window: window) { request in
            Terminal.standardError("vault serve: release request \(request.id): '\(TerminalText.escaped(request.peer))' asks for piece "
                + "\(request.holder) of \(request.type) \(request.secretID.prefix(16))"
                + (request.description.isEmpty ? "" : " (\(TerminalText.escaped(request.description)))")
                + "; approve with 'vault approve \(request.id)' within \(Int(request.expires.timeIntervalSince(request.asked))) s")
            guard Terminal.isAvailable else { return }
            // Each request gets its own question, in the order they came. One answered
            // elsewhere (vault approve|deny), or lapsed, is not asked, or is withdrawn while it
            // waits, so that the next answer typed goes to the next question.
            prompts.async {
                guard let approvals = approvals.value else { return }
                let open = { approvals.waiting().contains { $0.id == request.id } }
                let answer = try? Terminal.confirm("Release your piece of \(request.secretID.prefix(16)) to '\(TerminalText.escaped(request.peer))' (request \(request.id))?",
                                                   what: "releasing a piece", while: open)
                guard let yes = answer ?? nil else { return }
                if approvals.decide(request.id, approve: yes) != nil {
                    Terminal.standardError("vault serve: \(yes ? "approved" : "denied") request \(request.id)")
                }
            }
        }
        approvals.value = made
        return made
    }

    /// Lets the callback reach the object it belongs to.
    private final class Box: @unchecked Sendable {
        weak var value: ReleaseApprovals?
    }
}
