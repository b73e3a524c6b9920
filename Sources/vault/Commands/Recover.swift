import ArgumentParser
import Foundation
import VaultCore

struct Recover: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rebuild a secret from your share and pieces released by other holders.",
        discussion: """
            Every piece is checked against the dealer's signed header before anything is \
            combined. A piece that fails is reported as forged and left out; recovery goes on \
            while enough good pieces remain.
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

    @Option(help: ArgumentHelp("Read the secret's password layer from the first line of this file.", valueName: "file"))
    var passwordFile: String?

    func run() throws {
        let keystore = try home.openKeystore()
        let secret = try keystore.secret(matching: self.secret)
        let identity = try keys.unlock(keystore)
        let file = try output.map { try OutputFile(path: $0, replace: force) }
        let type = secret.header.type
        let password: () throws -> SecureBytes = { [passwordFile] in
            if let passwordFile { return try PassphraseFile.read(passwordFile) }
            do {
                return try Terminal.passphrase(prompt: "Password for the secret: ")
            } catch CLIError.noTerminal {
                throw VaultError.passwordRequired
            }
        }
        let sink: (UnsafeRawBufferPointer) throws -> Void = { bytes in
            if let file { try file.write(bytes) } else { FileHandle.standardOutput.write(Data(bytes)) }
        }
        let peers = try keystore.peers()
        func holder(_ piece: PieceOutcome) -> String {
            guard let sender = piece.sender else { return "your share" }
            let label = peers.first { $0.card == sender }?.label.value ?? "unknown holder \(sender.fingerprint)"
            return "'\(label)' (\(piece.source))"
        }
        var keyBytes = [UInt8]()
        defer { keyBytes.withUnsafeMutableBytes { $0.initializeMemory(as: UInt8.self, repeating: 0) } }
        let result = try SecretRecovery.recover(
            secret, keystore: keystore, identity: identity, pieceFiles: pieces, password: password,
            metadataReady: { metadata in
                if type == .contact { try Array(contactText(metadata).utf8).withUnsafeBytes(sink) }
            },
            verified: { piece in
                if let problem = piece.problem {
                    Terminal.standardError("vault: warning: forged piece \(piece.index ?? 0) from \(holder(piece)) set aside: \(problem)")
                } else {
                    Terminal.standardError("piece \(piece.index ?? 0) from \(holder(piece)): verified")
                }
            },
            output: { bytes in
                // A key is shown as hex, once whole.
                if type == .key { keyBytes += bytes } else { try sink(bytes) }
            })
        if type == .key { try Array((keyBytes.map { String(format: "%02x", $0) }.joined() + "\n").utf8).withUnsafeBytes(sink) }
        try file?.commit()
        if let name = result.metadata.fileName { Terminal.standardError("file name: \(name)") }
        if let username = result.metadata.username { Terminal.standardError("username: \(username)") }
        if let url = result.metadata.url { Terminal.standardError("url: \(url)") }
        let used = result.pieces.filter { $0.problem == nil }.compactMap(\.index).prefix(secret.header.threshold)
        Terminal.standardError("recovered \(type) \(secret.header.secretIDHex.prefix(16)) from pieces \(used.map(String.init).joined(separator: ", "))"
            + (output.map { " into \($0)" } ?? ""))
    }
}

/// A contact's fields as text lines, before its note.
func contactText(_ metadata: SecretMetadata) -> String {
    var lines: [String] = []
    if let name = metadata.contactName { lines.append("name: \(name)") }
    lines += metadata.phones.map { "phone: \($0)" }
    lines += metadata.emails.map { "email: \($0)" }
    if let address = metadata.address { lines.append("address: \(address)") }
    return lines.map { $0 + "\n" }.joined()
}
