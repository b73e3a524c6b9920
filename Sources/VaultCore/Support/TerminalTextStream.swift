/// Content someone else wrote (a received note, a recovered password) on its way to a
/// terminal, made unable to drive it: what ``TerminalText`` does for a line of text, for a
/// stream of any length.
///
/// A terminal acts on control characters. Raw, a note could set the clipboard (OSC 52),
/// plant a link that shows other text than it opens (OSC 8), clear the screen or rewrite
/// lines already shown. So every control character but newline and tab (C0, DEL, C1), a
/// carriage return that does not end a line, and the bidi controls (which show text in
/// another order than it is stored) are written escaped as Swift writes them (`\u{1B}`,
/// `\r`, `\u{202E}`), and bytes that are not UTF-8 as `\x{FF}`; everything else passes as
/// it is. A backslash is left alone: this is content to read, not a line to parse.
///
/// Chunks may end anywhere, inside a UTF-8 sequence or between a carriage return and its
/// line feed: the few bytes that wait for the next chunk, and the escaped output, live in
/// locked memory that is wiped (``SecureBytes``), so escaping copies the plaintext nowhere
/// else. Call ``finish()`` at the end.
public final class TerminalTextStream {
    private let sink: (UnsafeRawBufferPointer) throws -> Void
    private let output = SecureBytes(count: 1 << 16)
    private var outputCount = 0
    /// An unfinished UTF-8 sequence: its bytes so far, and how many it needs in all.
    private let pending = SecureBytes(count: 4)
    private var pendingCount = 0
    private var pendingNeeded = 0
    /// A carriage return waits to see whether a line feed follows.
    private var pendingReturn = false

    /// The most one input byte can add: an unfinished sequence of three bytes that turns out
    /// not to be UTF-8 (`\x{E0}` each), then the byte itself escaped.
    private static let longestEscape = 32

    /// Writes the escaped text through `sink`.
    public init(sink: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        self.sink = sink
    }

    /// Escapes the next chunk and passes it on.
    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        for byte in bytes {
            if outputCount + Self.longestEscape > output.count { try flush() }
            take(byte)
        }
        try flush()
    }

    /// The stream is whole: an unfinished sequence or a last carriage return is written escaped.
    public func finish() throws {
        endReturn()
        endSequenceAsBytes()
        try flush()
    }

    private func take(_ byte: UInt8) {
        if pendingReturn {
            pendingReturn = false
            if byte == 0x0A { return append("\r\n") }
            append("\\r")
        }
        if pendingNeeded > 0 {
            if continues(byte) {
                pending.withUnsafeMutableBytes { $0[pendingCount] = byte }
                pendingCount += 1
                if pendingCount == pendingNeeded { endSequence() }
                return
            }
            // Not a continuation: what came before is not UTF-8, and this byte starts afresh.
            endSequenceAsBytes()
        }
        switch byte {
        case 0x0A, 0x09: append(byte)
        case 0x0D: pendingReturn = true
        case 0x00..<0x20, 0x7F: appendEscaped(UInt32(byte))
        case 0x20..<0x80: append(byte)
        case 0xC2...0xDF: begin(byte, needing: 2)
        case 0xE0...0xEF: begin(byte, needing: 3)
        case 0xF0...0xF4: begin(byte, needing: 4)
        default: appendByte(byte)
        }
    }

    private func begin(_ lead: UInt8, needing count: Int) {
        pending.withUnsafeMutableBytes { $0[0] = lead }
        pendingCount = 1
        pendingNeeded = count
    }

    /// Whether `byte` may come next in the pending sequence (RFC 3629: no overlong forms, no
    /// surrogates, nothing above U+10FFFF).
    private func continues(_ byte: UInt8) -> Bool {
        guard pendingCount == 1 else { return (0x80...0xBF).contains(byte) }
        switch pending.withUnsafeBytes({ $0[0] }) {
        case 0xE0: return (0xA0...0xBF).contains(byte)
        case 0xED: return (0x80...0x9F).contains(byte)
        case 0xF0: return (0x90...0xBF).contains(byte)
        case 0xF4: return (0x80...0x8F).contains(byte)
        default: return (0x80...0xBF).contains(byte)
        }
    }

    private func endSequence() {
        let count = pendingCount
        pendingCount = 0
        pendingNeeded = 0
        let value = pending.withUnsafeBytes { p -> UInt32 in
            var value = UInt32(p[0]) & (0xFF >> (count + 1))
            for i in 1..<count { value = value << 6 | UInt32(p[i] & 0x3F) }
            return value
        }
        let scalar = Unicode.Scalar(value)!
        if scalar.properties.generalCategory == .control || scalar.properties.isBidiControl {
            appendEscaped(value)
        } else {
            pending.withUnsafeBytes { p in for i in 0..<count { append(p[i]) } }
        }
    }

    private func endSequenceAsBytes() {
        pending.withUnsafeBytes { p in for i in 0..<pendingCount { appendByte(p[i]) } }
        pendingCount = 0
        pendingNeeded = 0
    }

    private func endReturn() {
        if pendingReturn { append("\\r") }
        pendingReturn = false
    }

    private func append(_ byte: UInt8) {
        output.withUnsafeMutableBytes { $0[outputCount] = byte }
        outputCount += 1
    }

    private func append(_ text: StaticString) {
        text.withUTF8Buffer { for byte in $0 { append(byte) } }
    }

    /// `\0`, or `\u{XX}` with 2, 4 or 8 hex digits, as Swift's `escaped(asASCII:)` writes it.
    private func appendEscaped(_ value: UInt32) {
        if value == 0 { return append("\\0") }
        append("\\u{")
        appendHex(value, digits: value < 0x80 ? 2 : value <= 0xFFFF ? 4 : 8)
        append("}")
    }

    /// `\x{FF}`: a byte that is not part of any UTF-8 character.
    private func appendByte(_ byte: UInt8) {
        append("\\x{")
        appendHex(UInt32(byte), digits: 2)
        append("}")
    }

    private func appendHex(_ value: UInt32, digits: Int) {
        let hex: StaticString = "0123456789ABCDEF"
        hex.withUTF8Buffer { table in
            for shift in stride(from: 4 * (digits - 1), through: 0, by: -4) { append(table[Int(value >> UInt32(shift) & 15)]) }
        }
    }

    private func flush() throws {
        guard outputCount > 0 else { return }
        let count = outputCount
        outputCount = 0
        try output.withUnsafeBytes { try sink(UnsafeRawBufferPointer(rebasing: $0.prefix(count))) }
    }
}
