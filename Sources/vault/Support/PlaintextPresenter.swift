import Foundation
import VaultCore

/// How an opened secret reaches its reader, by type, the same for `vault recover` and
/// `vault receive`: a contact's fields come first as lines; a key is shown as hex once it is
/// whole, and until then sits in locked memory; a password printed to the terminal ends its
/// line (as `pass show` does), while a file gets it exact; everything else passes through.
///
/// Someone else wrote what is shown (a dealer, a group member, a key's holders), so on a
/// terminal it cannot drive it: the content goes through a ``TerminalTextStream`` and a
/// contact's fields are escaped (``TerminalText``). A pipe or a file gets every byte as it is.
final class PlaintextPresenter {
    private let type: SecretType
    private let toStandardOutput: Bool
    private let sink: (UnsafeRawBufferPointer) throws -> Void
    /// Set when standard output is a terminal.
    private let terminal: TerminalTextStream?
    private let key = SecureBytes(count: 32)
    private var keyLength = 0

    /// Writes through `sink`, which is standard output when `toStandardOutput`.
    init(type: SecretType, toStandardOutput: Bool, sink: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        self.type = type
        self.toStandardOutput = toStandardOutput
        self.sink = sink
        terminal = toStandardOutput && isatty(STDOUT_FILENO) == 1 ? TerminalTextStream(sink: sink) : nil
    }

    /// The secret's fields are known: a contact's go out first.
    func begin(_ metadata: SecretMetadata) throws {
        if type == .contact { try Array(Self.contactText(metadata, escaped: terminal != nil).utf8).withUnsafeBytes(sink) }
    }

    /// The next authenticated content.
    func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard type == .key else { return try (terminal?.write ?? sink)(bytes) }
        guard keyLength + bytes.count <= key.count else { throw VaultError.corruptSecret("a key longer than 32 bytes") }
        key.withUnsafeMutableBytes { ($0.baseAddress! + keyLength).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
        keyLength += bytes.count
    }

    /// The content is whole.
    func finish() throws {
        try terminal?.finish()
        if type == .key {
            let hex = SecureBytes(count: 2 * keyLength + 1)
            let digits = Array("0123456789abcdef".utf8)
            key.withUnsafeBytes { k in
                hex.withUnsafeMutableBytes { out in
                    for i in 0..<keyLength {
                        out[2 * i] = digits[Int(k[i] >> 4)]
                        out[2 * i + 1] = digits[Int(k[i] & 15)]
                    }
                    out[2 * keyLength] = 0x0A
                }
            }
            try hex.withUnsafeBytes(sink)
        }
        if type == .password && toStandardOutput { try Array("\n".utf8).withUnsafeBytes(sink) }
    }

    /// The fields that are not content, as lines for standard error.
    static func fieldLines(_ metadata: SecretMetadata) -> [String] {
        var lines: [String] = []
        if let name = metadata.fileName { lines.append("file name: \(TerminalText.escaped(name))") }
        if let username = metadata.username { lines.append("username: \(TerminalText.escaped(username))") }
        if let url = metadata.url { lines.append("url: \(TerminalText.escaped(url))") }
        return lines
    }

    /// A contact's fields as text lines, before its note; `escaped` for a terminal.
    static func contactText(_ metadata: SecretMetadata, escaped: Bool) -> String {
        let shown: (String) -> String = escaped ? { TerminalText.escaped($0, limit: .max) } : { $0 }
        var lines: [String] = []
        if let name = metadata.contactName { lines.append("name: \(shown(name))") }
        lines += metadata.phones.map { "phone: \(shown($0))" }
        lines += metadata.emails.map { "email: \(shown($0))" }
        if let address = metadata.address { lines.append("address: \(shown(address))") }
        return lines.map { $0 + "\n" }.joined()
    }
}
