import Foundation
import Testing
import VaultCore
import VaultTestSupport

/// One user: a temporary home and the built `vault` binary.
final class User {
    let directory = TemporaryDirectory("vault-cli")
    var vault: VaultBinary

    init(_ name: String = "user") {
        vault = VaultBinary(home: directory.file("home"))
    }

    /// Runs a command that must succeed and returns its stdout.
    @discardableResult
    func ok(_ arguments: String..., stdin: String = "", sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        try ok(arguments, stdin: stdin, sourceLocation: sourceLocation)
    }

    @discardableResult
    func ok(_ arguments: [String], stdin: String = "", sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let result = try vault.run(arguments, stdin: Array(stdin.utf8))
        #expect(result.status == 0, "vault \(arguments.joined(separator: " ")) failed: \(result.stderr)",
                sourceLocation: sourceLocation)
        return result.stdout
    }

    /// Runs a command that must fail, leaving the keystore byte for byte as it was, and
    /// returns its stderr.
    @discardableResult
    func fails(_ arguments: String..., stdin: String = "", status: Int32 = 1,
               sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        try fails(arguments, stdin: stdin, status: status, sourceLocation: sourceLocation)
    }

    @discardableResult
    func fails(_ arguments: [String], stdin: String = "", status: Int32 = 1,
               sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let before = vault.keystoreBytes()
        let result = try vault.run(arguments, stdin: Array(stdin.utf8))
        #expect(result.status == status, "vault \(arguments.joined(separator: " ")): status \(result.status), \(result.stderr)",
                sourceLocation: sourceLocation)
        #expect(result.stdout.isEmpty, "a failing command printed data: \(result.stdout)", sourceLocation: sourceLocation)
        #expect(vault.keystoreBytes() == before, "the keystore changed", sourceLocation: sourceLocation)
        // Progress may come first; then exactly one error line, and only hints after it.
        let lines = result.stderr.split(separator: "\n")
        let errors = lines.indices.filter { lines[$0].hasPrefix("vault: error: ") }
        #expect(errors.count == 1, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(lines[(errors.first.map { $0 + 1 } ?? lines.count)...].allSatisfy { $0.hasPrefix("vault: hint: ") },
                "\(result.stderr)", sourceLocation: sourceLocation)
        // In words, never as Swift describes an error (Tests/vaultTests/Hardening/ErrorWordingTests).
        let artifacts = ErrorWording.artifacts(in: result.stderr, allowing: ErrorWording.words(of: arguments))
        #expect(artifacts.isEmpty, "\(artifacts)", sourceLocation: sourceLocation)
        return result.stderr
    }

    /// Creates the identity.
    @discardableResult
    func initialize(_ label: String, _ extra: String...) throws -> User {
        // Unprotected unless a test asks otherwise: most tests are about something else.
        let protected = extra.contains("--passphrase-file") || extra.contains("--passphrase")
        let result = try vault.run(["init", "--label", label] + (protected ? [] : ["--no-passphrase"]) + extra)
        #expect(result.status == 0, "\(result.stderr)")
        return self
    }

    /// The card alone, `vault1…`, without the `#label` that `vault id --format text` adds.
    func card() throws -> String {
        String(try ok("id", "--format", "text").trimmingCharacters(in: .newlines).prefix { $0 != "#" })
    }
}
