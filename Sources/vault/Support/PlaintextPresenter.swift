import Foundation
import VaultCore

/// How an opened secret reaches its reader, by type, the same for `vault recover` and
/// `vault receive`: a contact's fields come first as lines; a key is shown as hex once it is
/// whole, and until then sits in locked memory; a password printed to the terminal ends its
/// line (as `pass show` does), while a file gets it exact; everything else passes through.
final class PlaintextPresenter {
    private let type: SecretType
    private let toStandardOutput: Bool
    private let sink: (UnsafeRawBufferPointer) throws -> Void
    private let key = SecureBytes(count: 32)
    private var keyLength = 0

    /// Writes through `sink`, which is standard output when `toStandardOutput`.
    init(type: SecretType, toStandardOutput: Bool, sink: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        self.type = type
        self.toStandardOutput = toStandardOutput
        self.sink = sink
    }

    /// The secret's fields are known: a contact's go out first.
    func begin(_ metadata: SecretMetadata) throws {
        if type == .contact { try Array(Self.contactText(metadata).utf8).withUnsafeBytes(sink) }
    }

    /// The next authenticated content.
    func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard type == .key else { return try sink(bytes) }
        guard keyLength + bytes.count <= key.count else { throw VaultError.corruptSecret("a key longer than 32 bytes") }
        key.withUnsafeMutableBytes { ($0.baseAddress! + keyLength).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
        keyLength += bytes.count
    }

    /// The content is whole.
    func finish() throws {
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

    /// A contact's fields as text lines, before its note.
    static func contactText(_ metadata: SecretMetadata) -> String {
        var lines: [String] = []
        if let name = metadata.contactName { lines.append("name: \(name)") }
        lines += metadata.phones.map { "phone: \($0)" }
        lines += metadata.emails.map { "email: \($0)" }
        if let address = metadata.address { lines.append("address: \(address)") }
        return lines.map { $0 + "\n" }.joined()
    }
}
