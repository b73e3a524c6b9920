import Foundation

/// Big-endian binary encoding for vault's formats. The reader is strict: every read is
/// bounds-checked and a parser must consume its input exactly.
package struct ByteWriter {
    package init() {}
    package private(set) var bytes: [UInt8] = []

    package mutating func u8(_ value: UInt8) { bytes.append(value) }
    package mutating func u16(_ value: UInt16) { bytes += [UInt8(value >> 8), UInt8(value & 0xff)] }
    package mutating func u32(_ value: UInt32) { for shift in stride(from: 24, through: 0, by: -8) { bytes.append(UInt8((value >> UInt32(shift)) & 0xff)) } }
    package mutating func u64(_ value: UInt64) { for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8((value >> UInt64(shift)) & 0xff)) } }
    package mutating func raw(_ value: some Collection<UInt8>) { bytes += value }

    /// A UTF-8 string behind a 1-byte length.
    package mutating func string8(_ value: String) {
        let utf8 = Array(value.utf8)
        precondition(utf8.count <= 255)
        u8(UInt8(utf8.count))
        raw(utf8)
    }

    /// A UTF-8 string behind a 2-byte length.
    package mutating func string16(_ value: String) {
        let utf8 = Array(value.utf8)
        precondition(utf8.count <= 65535)
        u16(UInt16(utf8.count))
        raw(utf8)
    }
}

package struct ByteReader {
    /// What a reader reports; the caller turns it into its format's error.
    package enum Failure: UserFacingError, Equatable {
        case truncated
        case trailingBytes
        case invalid(String)

        /// In words, for a caller that passes it on: never a Swift case name.
        package var description: String {
            switch self {
            case .truncated: "it is truncated"
            case .trailingBytes: "bytes follow its end"
            case .invalid(let detail): detail
            }
        }
    }

    private let bytes: [UInt8]
    private(set) var offset = 0

    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    package var remaining: Int { bytes.count - offset }

    package mutating func raw(_ count: Int) throws(Failure) -> [UInt8] {
        guard count >= 0, remaining >= count else { throw .truncated }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    package mutating func u8() throws(Failure) -> UInt8 { try raw(1)[0] }
    package mutating func u16() throws(Failure) -> UInt16 { try raw(2).reduce(0) { $0 << 8 | UInt16($1) } }
    package mutating func u32() throws(Failure) -> UInt32 { try raw(4).reduce(0) { $0 << 8 | UInt32($1) } }
    package mutating func u64() throws(Failure) -> UInt64 { try raw(8).reduce(0) { $0 << 8 | UInt64($1) } }

    /// A UTF-8 string behind a 1-byte length; `field` names it if it is not UTF-8.
    package mutating func string8(_ field: String) throws(Failure) -> String { try utf8(raw(Int(u8())), field) }
    /// A UTF-8 string behind a 2-byte length; `field` names it if it is not UTF-8.
    package mutating func string16(_ field: String) throws(Failure) -> String { try utf8(raw(Int(u16())), field) }

    private func utf8(_ bytes: [UInt8], _ field: String) throws(Failure) -> String {
        guard let text = String(validating: bytes, as: UTF8.self) else { throw .invalid("the \(field) is not UTF-8") }
        return text
    }

    /// Fails unless every byte was read.
    package func end() throws(Failure) {
        guard remaining == 0 else { throw .trailingBytes }
    }
}

extension Collection<UInt8> {
    /// The bytes as lowercase hex digits, two per byte. (Not `String(format:)` per byte: a
    /// relay writes two ids for every message it lists, and formatting was a third of a
    /// list's time; the digits go straight into the string's storage. Inlinable, so a
    /// caller in another module gets a copy specialized for its collection: unspecialized,
    /// the loop went through witness tables for every byte, 4% of a relay's list time.)
    @inlinable
    public var hex: String {
        String(unsafeUninitializedCapacity: count * 2) { text in
            let digits: StaticString = "0123456789abcdef"
            var i = 0
            for byte in self {
                text[i] = digits.utf8Start[Int(byte >> 4)]
                text[i + 1] = digits.utf8Start[Int(byte & 0x0f)]
                i += 2
            }
            return i
        }
    }
}

extension VaultError {
    /// What a reader of `what` throws for an error met while reading its fields: an invalid
    /// card says so, vault's other errors (a field's own words) pass as they are, and
    /// anything else (a ``ByteReader/Failure``) is `what` malformed, in its words.
    package static func reading(_ what: String, _ error: any Error) -> VaultError {
        guard let error = error as? VaultError else { return .malformed(what: what, detail: words(for: error)) }
        if case .invalidCard = error { return .malformed(what: what, detail: "a card in it is invalid") }
        return error
    }
}
