import CSodium
import Foundation

/// The text forms of an exported item (Docs/FORMAT.md §14), for channels that carry text:
///
/// - **Armor**, for mail and chat: `-----BEGIN VAULT ITEM-----`, the export in canonical
///   base64 at exactly 64 columns (the last line shorter), `-----END VAULT ITEM-----`.
///   Both directions stream, so an armored item of any size stays in bounded memory.
/// - **QR text**, for small items: the export as uppercase Bech32 under `vaultitem`, which a
///   QR code carries in its compact alphanumeric mode and a phone scanner returns as text.
public enum ItemArmor {
    static let begin = "-----BEGIN VAULT ITEM-----"
    static let end = "-----END VAULT ITEM-----"
    static let lineBytes = 48
    static let lineLength = 64
    static let qrPrefix = "vaultitem"
    /// The longest QR text accepted (a version 40 QR code holds 4296 alphanumeric characters).
    public static let maximumQRText = 4296

    /// Whether `bytes` (the start of an input) begin an armored item.
    public static func isArmor(_ bytes: [UInt8]) -> Bool {
        let marker = Array(begin.utf8)
        return bytes.count >= marker.count && Array(bytes[0..<marker.count]) == marker
    }

    /// Whether `text` looks like an item's QR text (its prefix), to tell it from a key card.
    public static func isQRText(_ text: String) -> Bool {
        text.trimmingCharacters(in: .whitespacesAndNewlines).lowercased().hasPrefix(qrPrefix + "1")
    }

    /// The QR text of an export.
    public static func qrText(_ export: [UInt8]) -> String { Bech32.encode(hrp: qrPrefix, data: export).uppercased() }

    /// The export inside a QR text.
    public static func export(fromQRText text: String) throws(VaultError) -> [UInt8] {
        let decoded: (hrp: String, data: [UInt8])
        do {
            decoded = try Bech32.decode(text.trimmingCharacters(in: .whitespacesAndNewlines), maximumLength: maximumQRText)
        } catch {
            throw .badArmor("the QR text is damaged: \(error)")
        }
        guard decoded.hrp == qrPrefix else { throw .badArmor("the QR text does not start with VAULTITEM1") }
        return decoded.data
    }

    static func base64(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        let variant = Int32(sodium_base64_VARIANT_ORIGINAL)
        var out = [UInt8](repeating: 0, count: sodium_base64_encoded_len(bytes.count, variant))
        out.withUnsafeMutableBufferPointer { o in
            _ = o.baseAddress!.withMemoryRebound(to: CChar.self, capacity: o.count) {
                sodium_bin2base64($0, o.count, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count, variant)
            }
        }
        return Array(out.dropLast())  // the terminating NUL
    }
}

/// Armors an export as it is written: give it the binary export in pieces of any size.
public final class ArmorWriter {
    private let emit: (UnsafeRawBufferPointer) throws -> Void
    private var pending: [UInt8] = []

    /// Starts the armor; the BEGIN line goes out at once.
    public init(emit: @escaping (UnsafeRawBufferPointer) throws -> Void) throws {
        self.emit = emit
        try Array((ItemArmor.begin + "\n").utf8).withUnsafeBytes(emit)
    }

    /// Adds export bytes.
    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        pending += bytes
        var offset = 0
        while pending.count - offset >= ItemArmor.lineBytes {
            try line(pending[offset..<offset + ItemArmor.lineBytes])
            offset += ItemArmor.lineBytes
        }
        pending.removeFirst(offset)
    }

    /// Writes the last line and the END line.
    public func finish() throws {
        if !pending.isEmpty { try line(pending[...]) }
        try Array((ItemArmor.end + "\n").utf8).withUnsafeBytes(emit)
    }

    private func line(_ bytes: ArraySlice<UInt8>) throws {
        let text = bytes.withUnsafeBytes { ItemArmor.base64($0) } + [0x0A]
        try text.withUnsafeBytes(emit)
    }
}

/// Reads the binary export out of an armored item, strictly: the BEGIN line first, full
/// 64-column lines of canonical base64 (CRLF endings allowed, as mail makes them), one
/// shorter last line, the END line, and nothing after it but line endings.
public final class ArmorReader: ByteSource {
    private var source: any ByteSource
    private var input: [UInt8] = []
    private var inputOffset = 0
    private var decoded: [UInt8] = []
    private var decodedOffset = 0
    private var state = State.start

    private enum State { case start, body, lastLineSeen, ended }

    /// Reads armor from `source`.
    public init(_ source: any ByteSource) { self.source = source }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        while decodedOffset == decoded.count {
            if state == .ended { return 0 }
            try advance()
        }
        let count = min(buffer.count, decoded.count - decodedOffset)
        decoded.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + decodedOffset, byteCount: count) }
        decodedOffset += count
        return count
    }

    private func advance() throws {
        guard let line = try nextLine() else {
            throw VaultError.truncated(what: state == .start ? "the armored item (no BEGIN line)" : "the armored item (no END line)")
        }
        let text = String(decoding: line, as: UTF8.self)
        switch state {
        case .start:
            guard text == ItemArmor.begin else { throw VaultError.badArmor("the first line is not \(ItemArmor.begin)") }
            state = .body
        case .body, .lastLineSeen:
            if text == ItemArmor.end {
                state = .ended
                while let rest = try nextLine() {
                    guard rest.isEmpty else { throw VaultError.badArmor("text follows the END line") }
                }
                return
            }
            guard state == .body else { throw VaultError.badArmor("a line follows a short line") }
            guard !line.isEmpty, line.count <= ItemArmor.lineLength, line.count % 4 == 0 else {
                throw VaultError.badArmor("a line is not 64 columns of base64")
            }
            // Only the last line may be short or padded.
            if line.count < ItemArmor.lineLength || line.last == UInt8(ascii: "=") { state = .lastLineSeen }
            decoded = try decode(line)
            decodedOffset = 0
        case .ended:
            return
        }
    }

    /// Canonical base64 only: decoding and encoding again must give the line back, so one
    /// item has one armor.
    private func decode(_ line: [UInt8]) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: line.count / 4 * 3)
        var length = 0
        let status = line.withUnsafeBufferPointer { l in
            l.baseAddress!.withMemoryRebound(to: CChar.self, capacity: l.count) {
                sodium_base642bin(&out, out.count, $0, l.count, nil, &length, nil, Int32(sodium_base64_VARIANT_ORIGINAL))
            }
        }
        guard status == 0 else { throw VaultError.badArmor("a line is not base64") }
        out.removeLast(out.count - length)
        guard out.withUnsafeBytes({ ItemArmor.base64($0) }) == line else { throw VaultError.badArmor("a line is not canonical base64") }
        return out
    }

    /// The next line without its ending, or nil at the end of input. Lines are bounded.
    private func nextLine() throws -> [UInt8]? {
        var line: [UInt8] = []
        while true {
            if inputOffset == input.count {
                input = try source.readFully(4096)
                inputOffset = 0
                if input.isEmpty { return line.isEmpty ? nil : line }
            }
            let byte = input[inputOffset]
            inputOffset += 1
            if byte == 0x0A {
                if line.last == 0x0D { line.removeLast() }
                return line
            }
            line.append(byte)
            guard line.count <= 128 else { throw VaultError.badArmor("a line is longer than 64 columns") }
        }
    }
}

/// A source that first gives back bytes already read from another (after sniffing).
public struct PrefixedSource: ByteSource {
    private var prefix: [UInt8]
    private var rest: any ByteSource

    /// `prefix`, then the rest of `rest`.
    public init(prefix: [UInt8], rest: any ByteSource) {
        self.prefix = prefix
        self.rest = rest
    }

    /// Reads up to `count` bytes from `source` to look at, and a source that still yields them.
    public static func peek(_ source: any ByteSource, count: Int) throws -> ([UInt8], PrefixedSource) {
        var source = source
        let head = try source.readFully(count)
        return (head, PrefixedSource(prefix: head, rest: source))
    }

    public mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard !prefix.isEmpty else { return try rest.read(into: buffer) }
        let count = min(buffer.count, prefix.count)
        prefix.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: count) }
        prefix.removeFirst(count)
        return count
    }
}
