import Foundation
import VaultCore
import VaultNet

/// `vault unlock` with a serve running: the serve's identity, unlocked when serve started,
/// recovers the key (the agent's request 7, Docs/PROTOCOL.md §8), so the person types no
/// passphrase again; the recovery's lines go back to the command, which prints them, and its
/// error (words, hint, exit status) too. The key goes straight into the agent.
///
/// It also sees the answers serve's own watch takes off the relays as soon as they come
/// (``RemoteRecovery/waitForAnswers(until:)`` looks at the keystore), instead of a second
/// reader of the relays racing the watch for them.
enum ServeRecovery {
    static func run(_ job: AgentRecoveryJob, keystore: Keystore, identity: Identity) async -> AgentRecoveryOutcome {
        do {
            // The command checked its options; parsed here as it parsed them.
            let options = try KeyRecoveryOptions.parse(job.options.arguments)
            let holding = try keystore.sharedKey(matching: job.keyID.hex)
            let password = job.password
            let key = try await Terminal.$lines.withValue({ job.say($0) }) {
                try await options.recoverKey(holding, keystore: keystore, identity: identity,
                                             command: "vault unlock \(ShellWord.quoted(holding.displayName))") {
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
