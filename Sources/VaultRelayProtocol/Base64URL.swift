import Foundation

/// Base64url without padding (RFC 4648 §5): how keys, nonces and signatures travel in
/// headers and JSON.
public enum Base64URL {
    /// The text form of `bytes`.
    public static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The bytes of `text`, or nil unless it is canonical base64url of exactly `length`
    /// bytes (when given): one value has one spelling, so a signed value cannot be
    /// re-spelled.
    public static func decode(_ text: some StringProtocol, length: Int? = nil) -> [UInt8]? {
        guard text.utf8.count <= 1 << 16,
              text.utf8.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2d || $0 == 0x5f })
        else { return nil }
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
        guard let data = Data(base64Encoded: standard) else { return nil }
        let bytes = [UInt8](data)
        guard length == nil || bytes.count == length, encode(bytes) == String(text) else { return nil }
        return bytes
    }
}

extension Array where Element == UInt8 {
    /// The bytes of 32 lowercase hex digits (an id), or nil.
    public init?(hexID text: some StringProtocol) {
        guard text.utf8.count == 32 else { return nil }
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            guard let byte = UInt8(text[index..<next], radix: 16), text[index..<next] == text[index..<next].lowercased() else { return nil }
            bytes.append(byte)
            index = next
        }
        self = bytes
    }
}
