import ArgumentParser
import Foundation
import VaultCore
import VaultNet
import VaultRelayClient

struct Recover: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rebuild a secret from your share and pieces from other holders.",
        discussion: """
            Without --piece, every trusted peer that holds a share of the secret and has an \
            address (stored with the peer, or given with --peer) is asked over an encrypted \
            channel, proving that you hold a share yourself. Every piece is checked against the \
            dealer's signed header before anything is combined. A piece that fails is reported \
            and left out; recovery goes on while enough good pieces remain.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The secret's name or id.", valueName: "id"), completion: Completions.secret)
    var secret: String

    @Option(name: .customLong("piece"), parsing: .upToNextOption,
            help: ArgumentHelp("Pieces released to you with 'vault secrets release'.", valueName: "file"))
    var pieces: [String] = []

    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("Write the secret to this file; - for standard output (the default, but for a file on a terminal).", valueName: "file"))
    var output: String?

    @Flag(name: [.customShort("O"), .customLong("save")],
          help: "Save the secret in the current directory under the file's own name (made safe; never over an existing file).")
    var save = false

    @Flag(help: "Replace an existing output file.")
    var force = false

    @Flag(help: ArgumentHelp("Make the output file durable (fsync) before returning.",
                             discussion: "Without it the kernel writes the file out within seconds, and a power cut before then can leave it short or empty; the pieces can recover it again."))
    var sync = false

    @Option(help: ArgumentHelp("Read the secret's password layer from the first line of this file.", valueName: "file"))
    var passwordFile: String?

    @OptionGroup var reach: PeerAddressOptions

    @Option(help: ArgumentHelp("Seconds to wait for holders over the LAN, in all (default: \(RecoveryWait.defaultSeconds), longer while a holder asks its person for consent); with --wait, for answers through relays too.",
                               valueName: "s"))
    var timeout: Int?

    @OptionGroup var relays: RelayRecoveryOptions

    @OptionGroup var progress: ProgressOption

    func validate() throws {
        if save && output != nil { throw ValidationError("--save and --output exclude each other") }
    }

    func run() async throws {
        let keystore = try home.openKeystore()
        let target = try relays.target(self.secret, keystore: keystore)
        let id = String(target.secretID.hex.prefix(16))
        let toStandardOutput = output == "-" || (output == nil && !save)
        // A file's bytes would garble the terminal (or drive it): refused before anything is
        // asked, gathered or written, as `item show` refuses. (Through relays without a share,
        // the type is known once a holder answered: checked then, before anything is written.)
        func refuseBinaryOnTerminal(_ type: SecretType) throws {
            if type == .file && output == nil && !self.save && isatty(STDOUT_FILENO) == 1 {
                throw CLIError.unavailable("secret \(id) is a file, not text, and standard output is a terminal",
                                           hint: "save it under its own name with 'vault recover \(self.secret) --save', or write it with -o FILE")
            }
        }
        if let own = target.own { try refuseBinaryOnTerminal(own.header.type) }
        // Input files are checked before the passphrase is asked for, and the output file is
        // made (hidden until the recovery is whole): an -o that exists, or cannot be written,
        // is said before any holder is asked, not after their pieces came.
        for path in pieces { _ = try FileSource(path: path) }
        let destination = RecoveredFile()
        destination.file = try output.flatMap { $0 == "-" ? nil : try OutputFile(path: $0, replace: force, hiddenUntilCommit: true, durable: sync) }
        let password = try layerPasswordReadingFirst(file: passwordFile, prompt: "Password for the secret: ")
        let identity = try keys.unlock(keystore)
        let own = target.own
        var gathered: [OutputFile] = []
        if let own, pieces.isEmpty, relays.group == nil {
            gathered = try await reach.recoverer(keystore, identity: identity, timeout: timeout).gatherPieces(of: own)
            ProgressLine.end()
        }
        // Through relays, when the LAN did not give enough (or this identity holds no share).
        let needed = own.map { $0.header.threshold - 1 }
        var remote: RemoteRecovery?
        var header = own?.header
        var relayed: [String] = []
        if pieces.isEmpty, needed.map({ gathered.count < $0 }) ?? true, try !keystore.groups().isEmpty || own == nil {
            // The command a hint gives to run again keeps where the secret goes: without -o, a
            // file on a terminal is refused.
            let keep = (output.map { ["-o", $0] } ?? []) + (save ? ["--save"] : []) + (passwordFile.map { ["--password-file", $0] } ?? [])
            let recovery = try await relays.recover(target, lanPieces: gathered.map(\.path), keystore: keystore, identity: identity, timeout: timeout,
                                                    rerunWith: keep)
            (remote, relayed, header) = (recovery.remote, recovery.pieces, recovery.header)
        }
        guard let header else { throw VaultError.tooFewPieces(have: 0, need: 0, missing: []) }
        try refuseBinaryOnTerminal(header.type)
        let type = header.type
        let pieces = self.pieces + gathered.map(\.path) + relayed
        // Plaintext goes straight from vault's buffers to the file descriptor: no copies
        // in Foundation buffers that nobody wipes.
        let sink: (UnsafeRawBufferPointer) throws -> Void = { bytes in
            if let file = destination.file { try file.write(bytes) } else { try writeStandardOutput(bytes) }
        }
        let durable = sync, save = self.save
        // With --save the name is known once the fields are decrypted, before any content.
        let begin: (SecretMetadata) throws -> Void = { metadata in
            if save {
                let name = ReceivedFileName.safeName(for: metadata.fileName, fallback: "\(id).txt")
                destination.file = try OutputFile(path: name, hiddenUntilCommit: true, durable: durable)
            }
        }
        let peers = try keystore.peers()
        let asked = remote?.recovery.asks ?? []
        func holder(_ piece: PieceOutcome) -> String {
            guard let sender = piece.sender else {
                // Only the dealer's or a trusted peer's card is named: the signature proves the Ed25519 key alone.
                return piece.source == "your share" ? "your share" : "an unverified sender (\(piece.source))"
            }
            let label = peers.first { $0.card == sender }?.label.value ?? "unknown holder \(sender.fingerprint)"
            if asked.contains(where: { $0.piece == piece.source }) { return "'\(label)' (through relays)" }
            return gathered.contains { $0.path == piece.source } ? "'\(label)'" : "'\(label)' (\(piece.source))"
        }
        let presenter = PlaintextPresenter(type: type, toStandardOutput: toStandardOutput, sink: sink)
        let meter = ProgressMeter("recovering")
        ProgressLine.show("recovering", [meter])
        let metadataReady: (SecretMetadata) throws -> Void = { metadata in
            try begin(metadata)
            try presenter.begin(metadata)
        }
        let verified = { (piece: PieceOutcome) in
            if let problem = piece.problem {
                Terminal.standardError("vault: warning: piece \(piece.index ?? 0) from \(holder(piece)) set aside, \(problem)")
            } else {
                Terminal.standardError("piece \(piece.index ?? 0) from \(holder(piece)): verified")
            }
        }
        let replyKeys = remote.map { [$0.replyKey] } ?? []
        // Gathered pieces are files deleted when released: keep them until recovery is done.
        let result = try withReleaseHint(secret: id, me: identity.label) { try withExtendedLifetime(gathered) {
            if let own {
                return try SecretRecovery.recover(own, keystore: keystore, identity: identity, pieceFiles: pieces, replyKeys: replyKeys,
                                                  password: password, metadataReady: metadataReady, verified: verified, progress: meter,
                                                  output: presenter.write)
            }
            return try SecretRecovery.recover(header: header, keystore: keystore, identity: identity, pieceFiles: pieces, replyKeys: replyKeys,
                                              password: password, metadataReady: metadataReady, verified: verified, progress: meter,
                                              output: presenter.write)
        } }
        try presenter.finish()
        try destination.file?.commit()
        ProgressLine.end()
        await remote?.complete()
        for line in PlaintextPresenter.fieldLines(result.metadata) { Terminal.standardError(line) }
        let used = result.pieces.filter { $0.problem == nil }.compactMap(\.index).prefix(header.threshold)
        Terminal.standardError("recovered \(type) \(id) from pieces \(used.map(String.init).joined(separator: ", "))"
            + (destination.file.map { " into \(TerminalText.escaped($0.path))" } ?? ""))
    }
}

/// Runs recovery; when too few pieces check out, the hint says what each missing holder
/// runs to release one offline, filled in for this secret and this identity.
private func withReleaseHint<T>(secret id: String, me: Label, _ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch VaultError.tooFewPieces(let have, let need, let missing) {
        let error = VaultError.tooFewPieces(have: have, need: need, missing: missing)
        let file = ShellWord.quoted("\(id.prefix(8))-for-\(me).vpiece")
        throw CLIError.unavailable(error.description, hint: "ask another holder to run 'vault secrets release \(id) --for \(ShellWord.quoted(me.value)) "
            + "-o \(file)' and pass that file with --piece, or to run 'vault serve' and approve your request")
    }
}

/// Where `vault recover` writes: a file given with -o, one named after the secret's own
/// file name (--save, known only once the fields are decrypted), or standard output (nil).
private final class RecoveredFile {
    var file: OutputFile?
}

/// Writes to standard output with write(2), retrying short writes.
func writeStandardOutput(_ bytes: UnsafeRawBufferPointer) throws {
    try writeAll(STDOUT_FILENO, bytes, name: "standard output")
}

/// write(2) until every byte is out; `name` is what errors call the descriptor.
func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, name: String = "pipe") throws {
    var offset = 0
    while offset < bytes.count {
        let count = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { throw VaultError.fileSystem(path: name, reason: String(cString: strerror(errno))) }
        offset += count
    }
}
