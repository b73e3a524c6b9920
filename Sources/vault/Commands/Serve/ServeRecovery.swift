import Foundation
import VaultCore
import VaultNet

/// `vault unlock` with a serve running: the serve's identity, unlocked when serve started,
/// recovers the key (the agent's request 7, Docs/PROTOCOL.md §8), so the person types no
/// passphrase again; the recovery's lines go back to the command, which prints them, and its
/// error (words, hint, exit status) too. The key goes straight into the agent.
///
/// It reads no holder mail itself: serve's own watch takes it (and asks its person about
/// requests on serve's terminal), and the recovery sees the answers in the keystore as soon
/// as the watch takes them (``RemoteRecovery/waitForAnswers(until:)``).
enum ServeRecovery {
    static func run(_ job: AgentRecoveryJob, keystore: Keystore, identity: Identity) async -> AgentRecoveryOutcome {
        do {
            // The command checked its options; parsed here as it parsed them.
            let options = try KeyRecoveryOptions.parse(job.options.arguments)
            let holding = try keystore.sharedKey(matching: job.keyID.hex)
            let password = job.password
            let key = try await Terminal.$lines.withValue({ job.say($0) }) {
                try await options.recoverKey(holding, keystore: keystore, identity: identity,
                                             command: "vault unlock \(ShellWord.quoted(holding.displayName))", inServe: true) {
                    // The command read it before asking, when the key has a password layer.
                    guard let password else { throw VaultError.passwordRequired }
                    return password
                }
            }
            return .unlocked(key)
        } catch {
            let (message, hint, status) = Report.parts(of: error) ?? (Report.words(for: error), nil, ExitStatus.failure)
            return .failed(error: message, hint: hint, status: status)
        }
    }
}
