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

    @Argument(help: ArgumentHelp("The secret's name or id.", valueName: "id"))
    var secret: String

    @Option(name: .customLong("piece"), parsing: .upToNextOption,
            help: ArgumentHelp("Pieces released to you with 'vault secrets release'.", valueName: "file"))
    var pieces: [String] = []

    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("Write the secret to this file (default: standard output).", valueName: "file"))
    var output: String?

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

    func run() async throws {
        let keystore = try home.openKeystore()
        let target = try relays.target(self.secret, keystore: keystore)
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
            let recovery = try await relays.recover(target, lanPieces: gathered.count, keystore: keystore, identity: identity, timeout: timeout)
            (remote, relayed, header) = (recovery.remote, recovery.pieces, recovery.header)
        }
        guard let header else { throw VaultError.tooFewPieces(have: 0, need: 0, missing: []) }
        let pieces = self.pieces + gathered.map(\.path) + relayed
        let file = try output.map { try OutputFile(path: $0, replace: force, hiddenUntilCommit: true, durable: sync) }
        let type = header.type
        let password = layerPassword(file: passwordFile, prompt: "Password for the secret: ")
        // Plaintext goes straight from vault's buffers to the file descriptor: no copies
        // in Foundation buffers that nobody wipes.
        let sink: (UnsafeRawBufferPointer) throws -> Void = { bytes in
            if let file { try file.write(bytes) } else { try writeStandardOutput(bytes) }
        }
        let peers = try keystore.peers()
        let asked = remote?.recovery.asks ?? []
        func holder(_ piece: PieceOutcome) -> String {
            guard let sender = piece.sender else {
                // Only the dealer's or a trusted peer's card is named: the signature proves the Ed25519 key alone.
                return piece.source == "your share" ? "your share" : "an unverified sender (\(piece.source))"
            }
            let label = peers.first { $0.card == sender }?.label.value ?? "unknown holder \(sender.fingerprint)"
            let how = asked.contains { $0.piece == piece.source } ? " (through relays)" : ""
            return gathered.contains { $0.path == piece.source } || !how.isEmpty ? "'\(label)'\(how)" : "'\(label)' (\(piece.source))"
        }
        let presenter = PlaintextPresenter(type: type, toStandardOutput: file == nil, sink: sink)
        let meter = ProgressMeter("recovering")
        ProgressLine.show("recovering", [meter])
        let verified = { (piece: PieceOutcome) in
            if let problem = piece.problem {
                Terminal.standardError("vault: warning: piece \(piece.index ?? 0) from \(holder(piece)) set aside, \(problem)")
            } else {
                Terminal.standardError("piece \(piece.index ?? 0) from \(holder(piece)): verified")
            }
        }
        let replyKeys = remote.map { [$0.replyKey] } ?? []
        // Gathered pieces are files deleted when released: keep them until recovery is done.
        let result = try withExtendedLifetime(gathered) {
            if let own {
                return try SecretRecovery.recover(own, keystore: keystore, identity: identity, pieceFiles: pieces, replyKeys: replyKeys,
                                                  password: password, metadataReady: presenter.begin, verified: verified, progress: meter,
                                                  output: presenter.write)
            }
            return try SecretRecovery.recover(header: header, keystore: keystore, identity: identity, pieceFiles: pieces, replyKeys: replyKeys,
                                              password: password, metadataReady: presenter.begin, verified: verified, progress: meter,
                                              output: presenter.write)
        }
        try presenter.finish()
        try file?.commit()
        ProgressLine.end()
        remote?.end()
        for line in PlaintextPresenter.fieldLines(result.metadata) { Terminal.standardError(line) }
        let used = result.pieces.filter { $0.problem == nil }.compactMap(\.index).prefix(header.threshold)
        Terminal.standardError("recovered \(type) \(header.secretIDHex.prefix(16)) from pieces \(used.map(String.init).joined(separator: ", "))"
            + (output.map { " into \($0)" } ?? ""))
    }
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
