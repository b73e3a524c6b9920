import ArgumentParser
import Foundation
import VaultCore

struct RecoverWords: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recover-words",
        abstract: "Rebuild a secret from SLIP-39 mnemonics, with no keystore.",
        discussion: """
            Reads the mnemonics from standard input, typed or pasted: one a line, or a few \
            words a line with an empty line after each mnemonic; lines starting with '#' are \
            left out, so the output of 'vault secrets export-words' reads as it is. Words may \
            be typed by their first four letters. A word that is not SLIP-39's, or a checksum \
            that fails, is named by its mnemonic and its place.

            SLIP-39 cannot tell a wrong passphrase from a right one: a wrong one gives another \
            secret. Any set made by a SLIP-39 tool (Trezor's 'shamir', a hardware wallet) is \
            read as well. The secret goes to standard output in hex, as text with --text, or \
            to a file with -o.
            """)

    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("Write the secret's bytes to this file.", valueName: "file"))
    var output: String?

    @Flag(help: "Write the secret as text (it must be UTF-8), not hex: for a note.")
    var text = false

    @Flag(help: "Replace an existing output file.")
    var force = false

    @OptionGroup var passphrase: WordsPassphraseOption

    func validate() throws {
        if text && output != nil { throw ValidationError("--text is for standard output; -o writes the bytes as they are") }
    }

    func run() throws {
        let file = try output.map { try OutputFile(path: $0, replace: force, hiddenUntilCommit: true) }
        let secret = try WordsRecovery.read(passphrase: passphrase)
        if let file {
            try secret.withUnsafeBytes { try file.write($0) }
            try file.commit()
            Terminal.standardError("recovered \(secret.count) bytes into \(TerminalText.escaped(file.path))")
            return
        }
        try WordsRecovery.present(secret, asText: text)
    }
}

/// Reading mnemonics and handing the secret out, for 'vault recover-words'.
enum WordsRecovery {
    /// Reads the mnemonics (all of standard input, bounded), then the passphrase, and
    /// combines them.
    static func read(passphrase: WordsPassphraseOption) throws -> SecureBytes {
        // Read whole before anything is parsed, into locked memory (Terminal.typedNote says
        // why), from a terminal or a pipe alike.
        let typed = try Terminal.typedNote("or paste the SLIP-39 mnemonics, one a line")
        guard typed.count <= MnemonicReader.maximumText else {
            throw VaultError.invalidWords("more than \(MnemonicReader.maximumText) bytes were given")
        }
        let mnemonics = try MnemonicReader.mnemonics(in: typed)
        var progress = SLIP39Progress()
        for (number, mnemonic) in mnemonics.enumerated() { try progress.add(mnemonic, number: number + 1) }
        guard progress.isComplete else { throw VaultError.invalidWords(progress.missing) }
        Terminal.standardError("read \(mnemonics.count) mnemonic\(mnemonics.count == 1 ? "" : "s"): enough to recover")
        return try progress.combine(passphrase: try passphrase.read(choosing: false))
    }

    /// Writes the secret to standard output: hex, or the text itself.
    static func present(_ secret: SecureBytes, asText: Bool) throws {
        if asText {
            // Checked without making a String of the secret (one nobody wipes).
            let valid = secret.withUnsafeBytes { bytes in
                var iterator = bytes.makeIterator(), decoder = UTF8()
                while true {
                    switch decoder.decode(&iterator) {
                    case .scalarValue: continue
                    case .emptyInput: return true
                    case .error: return false
                    }
                }
            }
            guard valid else {
                throw CLIError.unavailable("the secret is not UTF-8 text", hint: "leave out --text for hex, or write its bytes with -o FILE")
            }
            try secret.withUnsafeBytes { try writeStandardOutput($0) }
            if isatty(STDOUT_FILENO) == 1 { try writeStandardOutput("\n") }
            return
        }
        let digits = Array("0123456789abcdef".utf8)
        let hex = SecureBytes(count: 2 * secret.count + 1)
        hex.withUnsafeMutableBytes { out in
            secret.withUnsafeBytes { bytes in
                for (i, byte) in bytes.enumerated() {
                    out[2 * i] = digits[Int(byte >> 4)]
                    out[2 * i + 1] = digits[Int(byte & 15)]
                }
            }
            out[2 * secret.count] = 0x0a
        }
        try hex.withUnsafeBytes { try writeStandardOutput($0) }
    }
}
