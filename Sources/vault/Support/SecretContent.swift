import ArgumentParser
import VaultCore
import VaultNet
import VaultRelayClient

/// Where a command that needs a small secret's content (to deal it as SLIP-39 words) gets
/// it: the holder's own share and pieces of others, released with 'vault secrets release'
/// (--piece), else asked of the holders on the LAN, then through the relays of your groups,
/// as 'vault recover' asks. The content lives in locked memory only, never in a file.
struct SecretContentOptions: ParsableArguments {
    @Option(name: .customLong("piece"), parsing: .upToNextOption,
            help: ArgumentHelp("Pieces released to you with 'vault secrets release' (else the holders are asked).", valueName: "file"))
    var pieces: [String] = []

    @Option(help: ArgumentHelp("Read the secret's password layer, if it has one, from the first line of this file.", valueName: "file"))
    var passwordFile: String?

    @OptionGroup var reach: PeerAddressOptions

    @Option(help: ArgumentHelp("Seconds to wait for holders (default: \(RecoveryWait.defaultSeconds), longer while a holder asks its person).",
                               valueName: "s"))
    var timeout: Int?

    @OptionGroup var relays: RelayRecoveryOptions

    /// The content of `secret` (at most `limit` bytes: more is refused as soon as it
    /// arrives), recovered with this keystore's share.
    func recover(_ secret: StoredSecret, keystore: Keystore, identity: Identity, limit: Int) async throws -> SecureBytes {
        defer { ProgressLine.end() }
        if relays.dealer != nil { throw CLIError.invalidInput("--dealer and --from are for 'vault recover' and 'vault reshare'") }
        for path in pieces { _ = try FileSource(path: path) }
        let password = try layerPasswordReadingFirst(file: passwordFile, prompt: "Password for the secret: ")
        var files = pieces
        var gathered: [OutputFile] = []
        var remote: RemoteRecovery?
        var replyKeys: [ReplyKey] = []
        if pieces.isEmpty {
            let recoverer = reach.recoverer(keystore, identity: identity, timeout: timeout)
            gathered = try await recoverer.gatherPieces(of: secret)
            ProgressLine.end()
            files = gathered.map(\.path)
            if gathered.count < secret.header.threshold - 1, try !keystore.groups().isEmpty {
                let target = RecoveryTarget(own: secret, dealer: secret.header.dealer, secretID: secret.header.secretID)
                let outcome = try await relays.recover(target, lanPieces: files, keystore: keystore, identity: identity, timeout: timeout)
                files += outcome.pieces
                remote = outcome.remote
                replyKeys = [outcome.remote.replyKey]
            }
        }
        let content = SecureBytes(count: limit)
        var length = 0
        _ = try withExtendedLifetime(gathered) {
            try SecretRecovery.recover(
                secret, keystore: keystore, identity: identity, pieceFiles: files, replyKeys: replyKeys, password: password,
                verified: { piece in
                    if let problem = piece.problem { Terminal.standardError("vault: warning: piece \(piece.index ?? 0) set aside, \(problem)") }
                },
                output: { bytes in
                    guard length + bytes.count <= limit else {
                        throw VaultError.wordsDoNotFit("SLIP-39 words carry \(SecretWords.minimumLength) to \(SecretWords.maximumLength) bytes, an even number, and this secret has more than \(limit)")
                    }
                    content.withUnsafeMutableBytes { ($0.baseAddress! + length).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
                    length += bytes.count
                })
        }
        await remote?.complete()
        return content.withUnsafeBytes { SecureBytes(copying: $0.prefix(length)) }
    }
}

/// The SLIP-39 passphrase: from the first line of a file, none, or asked on the terminal
/// (twice, where it is chosen). A wrong one is never detected (the standard means it so):
/// recovery with it gives another secret.
struct WordsPassphraseOption: ParsableArguments {
    @Option(help: ArgumentHelp("Read the SLIP-39 passphrase from the first line of this file (printable ASCII).", valueName: "file"))
    var wordsPassphraseFile: String?

    @Flag(help: "Use no SLIP-39 passphrase, without asking.")
    var noWordsPassphrase = false

    func validate() throws {
        if wordsPassphraseFile != nil && noWordsPassphrase {
            throw ValidationError("--words-passphrase-file and --no-words-passphrase exclude each other")
        }
    }

    /// The passphrase; `choosing` asks twice.
    func read(choosing: Bool) throws -> SecureBytes {
        if noWordsPassphrase { return SecureBytes(count: 0) }
        if let wordsPassphraseFile { return try PassphraseFile.read(wordsPassphraseFile, what: "SLIP-39 passphrase") }
        do {
            let prompt = choosing ? "SLIP-39 passphrase (Enter for none): " : "SLIP-39 passphrase (Enter if there is none): "
            if choosing {
                // An empty one is a choice here: asked once more to confirm either way.
                let first = try Terminal.passphrase(prompt: prompt)
                let second = try Terminal.passphrase(prompt: "Repeat it: ")
                guard first.constantTimeEquals(second) else { throw CLIError.passphrasesDiffer }
                return first
            }
            return try Terminal.passphrase(prompt: prompt)
        } catch CLIError.noTerminal {
            throw CLIError.unavailable("a SLIP-39 passphrase is asked for on a terminal, and there is none",
                                       hint: "pass --words-passphrase-file FILE, or --no-words-passphrase for none")
        }
    }
}
