/// Bech32 (BIP 173) without the 90-character limit, as age uses it for its keys.
///
/// Strict: one case only, every character from the alphabet, a valid checksum, and
/// zero padding bits (a non-canonical encoding of the same bytes is refused).
enum Bech32 {
    enum Failure: UserFacingError, Equatable {
        case tooLong
        case mixedCase
        case missingSeparator
        case invalidCharacter
        case badChecksum
        case nonCanonicalPadding

        /// In words, as a key card's defect says it.
        var description: String { CardDefect(self).description }
    }

    /// Longest string accepted; a key card is 115 characters.
    static let maximumLength = 1024

    private static let alphabet = Array("qpzry9x8gf2tvdw0s3jn54khce6mua7l".utf8)
    private static let reverse: [Int8] = {
        var table = [Int8](repeating: -1, count: 128)
        for (value, character) in alphabet.enumerated() { table[Int(character)] = Int8(value) }
        return table
    }()

    /// Encodes `data` under the human-readable part `hrp`, in lowercase.
    static func encode(hrp: String, data: [UInt8]) -> String {
        encodeValues(hrp: hrp, values: regroup(data, from: 8, to: 5, pad: true)!)
    }

    /// Encodes already-grouped 5-bit values (for tests that forge non-canonical strings).
    static func encodeValues(hrp: String, values: [UInt8]) -> String {
        let hrpBytes = Array(hrp.utf8)
        let checksum = self.checksum(hrp: hrpBytes, values: values)
        return hrp + "1" + String(decoding: (values + checksum).map { alphabet[Int($0)] }, as: UTF8.self)
    }

    /// Decodes a string in either case; returns the lowercase hrp and the bytes.
    static func decode(_ text: String, maximumLength: Int = maximumLength) throws(Failure) -> (hrp: String, data: [UInt8]) {
        let bytes = Array(text.utf8)
        guard bytes.count <= maximumLength else { throw .tooLong }
        guard bytes.allSatisfy({ $0 >= 33 && $0 <= 126 }) else { throw .invalidCharacter }
        let hasLower = bytes.contains { $0 >= 0x61 && $0 <= 0x7a }
        let hasUpper = bytes.contains { $0 >= 0x41 && $0 <= 0x5a }
        guard !(hasLower && hasUpper) else { throw .mixedCase }
        let lower = bytes.map { ($0 >= 0x41 && $0 <= 0x5a) ? $0 | 0x20 : $0 }
        guard let separator = lower.lastIndex(of: UInt8(ascii: "1")),
              separator >= 1, lower.count - separator - 1 >= 6
        else { throw .missingSeparator }
        let hrp = Array(lower[..<separator])
        var values: [UInt8] = []
        values.reserveCapacity(lower.count - separator - 1)
        for character in lower[(separator + 1)...] {
            let value = character < 128 ? reverse[Int(character)] : -1
            guard value >= 0 else { throw .invalidCharacter }
            values.append(UInt8(value))
        }
        guard polymod(expand(hrp) + values) == 1 else { throw .badChecksum }
        guard let data = regroup(Array(values.dropLast(6)), from: 5, to: 8, pad: false) else {
            throw .nonCanonicalPadding
        }
        return (String(decoding: hrp, as: UTF8.self), data)
    }

    /// The checksum's state after `values`, from `start`; its generator terms are masked in,
    /// not chosen by a branch, since a recovery kit's values are a key share.
    static func polymod(_ values: some Sequence<UInt8>, start: UInt32 = 1) -> UInt32 {
        let generator: [UInt32] = [0x3b6a_57b2, 0x2650_8e6d, 0x1ea1_19fa, 0x3d42_33dd, 0x2a14_62b3]
        var check = start
        for value in values {
            let top = check >> 25
            check = (check & 0x1ff_ffff) << 5 ^ UInt32(value)
            for i in 0..<5 { check ^= generator[i] & (0 &- ((top >> UInt32(i)) & 1)) }
        }
        return check
    }

    /// Encodes bytes in locked memory as uppercase text in locked memory, for the QR codes
    /// of a recovery kit, which carry a key share.
    static func encodeUppercase(hrp: String, data: SecureBytes) -> SecureBytes {
        let hrpBytes = Array(hrp.utf8)
        let count = (8 * data.count + 4) / 5
        let values = SecureBytes(count: count)
        values.withUnsafeMutableBytes { out in
            data.withUnsafeBytes { bytes in
                var accumulator: UInt32 = 0, bits = 0, next = 0
                for byte in bytes {
                    accumulator = accumulator << 8 | UInt32(byte)
                    bits += 8
                    while bits >= 5 {
                        bits -= 5
                        out[next] = UInt8(accumulator >> UInt32(bits) & 31)
                        next += 1
                    }
                    accumulator &= (1 << UInt32(bits)) - 1
                }
                if bits > 0 { out[next] = UInt8(accumulator << UInt32(5 - bits) & 31) }
            }
        }
        let state = values.withUnsafeBytes { polymod($0, start: polymod(expand(hrpBytes))) }
        let mod = polymod([0, 0, 0, 0, 0, 0], start: state) ^ 1
        let text = SecureBytes(count: hrpBytes.count + 1 + count + 6)
        text.withUnsafeMutableBytes { out in
            for (i, byte) in hrpBytes.enumerated() { out[i] = byte & ~0x20 }
            out[hrpBytes.count] = UInt8(ascii: "1")
            values.withUnsafeBytes { values in
                for (i, value) in values.enumerated() { out[hrpBytes.count + 1 + i] = uppercase(alphabet[Int(value)]) }
            }
            for i in 0..<6 { out[hrpBytes.count + 1 + count + i] = uppercase(alphabet[Int((mod >> (5 * (5 - UInt32(i)))) & 31)]) }
        }
        return text
    }

    private static func uppercase(_ character: UInt8) -> UInt8 { (0x61...0x7a).contains(character) ? character & ~0x20 : character }

    private static func expand(_ hrp: [UInt8]) -> [UInt8] {
        hrp.map { $0 >> 5 } + [0] + hrp.map { $0 & 31 }
    }

    private static func checksum(hrp: [UInt8], values: [UInt8]) -> [UInt8] {
        let mod = polymod(expand(hrp) + values + [0, 0, 0, 0, 0, 0]) ^ 1
        return (0..<6).map { UInt8((mod >> (5 * (5 - UInt32($0)))) & 31) }
    }

    /// Converts between bit-group sizes. Without padding, leftover bits must be fewer than
    /// `from` and all zero, otherwise the encoding is not canonical and nil is returned.
    private static func regroup(_ data: [UInt8], from: Int, to: Int, pad: Bool) -> [UInt8]? {
        var accumulator = 0, bits = 0
        let mask = (1 << to) - 1
        var out: [UInt8] = []
        out.reserveCapacity(data.count * from / to + 1)
        for value in data {
            accumulator = (accumulator << from) | Int(value)
            bits += from
            while bits >= to {
                bits -= to
                out.append(UInt8((accumulator >> bits) & mask))
            }
            accumulator &= (1 << bits) - 1
        }
        if pad {
            if bits > 0 { out.append(UInt8((accumulator << (to - bits)) & mask)) }
        } else if bits >= from || accumulator != 0 {
            return nil
        }
        return out
    }
}
