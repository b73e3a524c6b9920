import VaultCore
import VaultNet

/// Serves a `vault://` request from the terminal: the person is asked there, keys come from
/// the agent of `vault serve`, and a locked key is recovered from its holders.
struct URLTerminalHost: URLRequestHost {
    let keystore: Keystore
    let access: KeyAccess
    let keys: PassphraseOption
    let recovery: KeyRecoveryOptions

    var canAsk: Bool { Terminal.isAvailable }

    func confirm(_ question: String, details: [String]) throws -> Bool {
        try Terminal.confirm(question, details: details, what: "a vault:// request")
    }

    func choose(_ question: String, among choices: [String]) -> Int? {
        for (number, choice) in choices.enumerated() { Terminal.standardError("  \(number + 1)  \(choice)") }
        guard let answer = Terminal.ask("\(question) [1-\(choices.count)] "), let number = Int(answer),
              choices.indices.contains(number - 1) else { return nil }
        return number - 1
    }

    func ask(_ question: String) -> String? { Terminal.ask(question) }

    func password(prompt: String, confirm: Bool) throws -> SecureBytes {
        do {
            return try Terminal.passphrase(prompt: prompt, confirm: confirm)
        } catch CLIError.cancelled {
            throw URLCancelled()
        }
    }

    func unlockedKeyIDs() async throws -> Set<[UInt8]> {
        guard let agent = access.agent else { return [] }
        return Set(try await agent.status().map(\.keyID))
    }

    func unlockedItemKey(for header: ItemHeader, holding: KeyHolding) async throws -> SecureBytes? {
        try await access.unlockedItemKey(for: header, holding: holding)
    }

    /// Recovers the key and leaves it in the agent for 15 minutes.
    func recoverKey(_ holding: KeyHolding) async throws -> SecureBytes {
        defer { ProgressLine.end() }
        let key = try await recovery.recoverer(keystore, identity: try keys.unlock(keystore))
            .recoverSharedKey(holding, password: recovery.keyPassword(for: holding))
        if let agent = access.agent { try await agent.unlock(keyID: holding.keyID, key: key, seconds: 15 * 60) }
        return key
    }

    func note(_ line: String) { Terminal.standardError(line) }
}
