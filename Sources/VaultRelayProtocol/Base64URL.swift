import Foundation

/// Base64url without padding (RFC 4648 §5): how keys, nonces and signatures travel in
/// headers and JSON.
public enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    /// Each ASCII byte's 6-bit value, 0xff for one outside the alphabet.
    private static let values: [UInt8] = {
        var values = [UInt8](repeating: 0xff, count: 256)
        for (value, byte) in alphabet.enumerated() { values[Int(byte)] = UInt8(value) }
        return values
    }()

    /// The text form of `bytes`.
    public static func encode(_ bytes: [UInt8]) -> String {
        var text: [UInt8] = []
        text.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let rest = bytes.count - index
            let b0 = UInt32(bytes[index]), b1 = rest > 1 ? UInt32(bytes[index + 1]) : 0, b2 = rest > 2 ? UInt32(bytes[index + 2]) : 0
            let group = b0 << 16 | b1 << 8 | b2
            for position in 0..<min(4, rest + 1) { text.append(alphabet[Int(group >> UInt32(18 - 6 * position) & 0x3f)]) }
            index += 3
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes of `text`, or nil unless it is canonical base64url of exactly `length`
    /// bytes (when given): one value has one spelling, so a signed value cannot be
    /// re-spelled. (Decoded here rather than through Foundation, which every signed request
    /// went through four times.)
    public static func decode(_ text: some StringProtocol, length: Int? = nil) -> [UInt8]? {
        let input = Array(text.utf8)
        guard input.count <= 1 << 16, input.count % 4 != 1 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(input.count * 3 / 4)
        var index = 0
        while index < input.count {
            let chunk = input[index..<min(input.count, index + 4)]
            var group: UInt32 = 0
            for byte in chunk {
                let value = values[Int(byte)]
                guard value != 0xff else { return nil }
                group = group << 6 | UInt32(value)
            }
            group <<= UInt32(6 * (4 - chunk.count))
            let produced = chunk.count - 1
            for position in 0..<produced { bytes.append(UInt8(truncatingIfNeeded: group >> UInt32(16 - 8 * position))) }
            // Bits past the last byte must be zero: another spelling of the same bytes otherwise.
            guard group & ((1 << UInt32(24 - 8 * produced)) - 1) == 0 else { return nil }
            index += 4
        }
        guard length == nil || bytes.count == length else { return nil }
        return bytes
    }
}

extension Array where Element == UInt8 {
    /// The bytes of 32 lowercase hex digits (an id), or nil.
    public init?(hexID text: some StringProtocol) {
        let digits = Array(text.utf8)
        guard digits.count == 32 else { return nil }
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case 0x30...0x39: digit - 0x30
            case 0x61...0x66: digit - 0x61 + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        for index in stride(from: 0, to: 32, by: 2) {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        self = bytes
    }
}
