/// One SLIP-39 share: its public fields and its value, and the mnemonic that carries them:
///
///     id (15 bits) ‖ ext (1) ‖ e (4) ‖ group index (4) ‖ group threshold - 1 (4)
///     ‖ group count - 1 (4) ‖ member index (4) ‖ member threshold - 1 (4)
///     ‖ share value, left-padded with zero bits to a multiple of 10 ‖ RS1024 checksum (30)
///
/// cut into 10-bit words, big-endian.
struct SLIP39Share {
    let identifier: UInt16
    let extendable: Bool
    let exponent: Int
    let groupIndex: Int
    let groupThreshold: Int
    let groupCount: Int
    let memberIndex: Int
    let memberThreshold: Int
    let value: SecureBytes

    /// Words of the fields before the value, and of the checksum.
    static let headerWords = 4
    static let checksumWords = 3
    /// The shortest share: a 128-bit value (13 words).
    static let minimumWords = 20
    /// The longest share read: a 512-bit value (52 words). The standard sets no bound;
    /// this one keeps what is read from a person bounded, with room above vault's 32 bytes.
    static let maximumWords = 59

    /// The words for a value of `length` bytes.
    static func wordCount(valueLength length: Int) -> Int { headerWords + (8 * length + 9) / 10 + checksumWords }

    /// Whether the fields that every share of one set shares are equal.
    func sameSet(as other: SLIP39Share) -> Bool {
        identifier == other.identifier && extendable == other.extendable && exponent == other.exponent
            && groupThreshold == other.groupThreshold && groupCount == other.groupCount && value.count == other.value.count
    }

    /// The mnemonic.
    func mnemonic() -> Mnemonic {
        precondition(identifier < 1 << 15 && (0...15).contains(exponent) && (1...16).contains(groupCount)
            && (1...groupCount).contains(groupThreshold) && (0..<groupCount).contains(groupIndex)
            && (1...16).contains(memberThreshold) && (0..<16).contains(memberIndex))
        let valueWords = (8 * value.count + 9) / 10
        let mnemonic = Mnemonic(count: Self.headerWords + valueWords + Self.checksumWords)
        let header = UInt64(identifier) << 25 | UInt64(extendable ? 1 : 0) << 24 | UInt64(exponent) << 20
            | UInt64(groupIndex) << 16 | UInt64(groupThreshold - 1) << 12 | UInt64(groupCount - 1) << 8
            | UInt64(memberIndex) << 4 | UInt64(memberThreshold - 1)
        mnemonic.withMutableValues { words in
            for i in 0..<Self.headerWords { words[i] = UInt16(header >> UInt64(30 - 10 * i) & 1023) }
            // The value's bits after the padding's zeros, ten at a time.
            var accumulator: UInt32 = 0, bits = 10 * valueWords - 8 * value.count, next = Self.headerWords
            value.withUnsafeBytes { bytes in
                for byte in bytes {
                    accumulator = accumulator << 8 | UInt32(byte)
                    bits += 8
                    if bits >= 10 {
                        words[next] = UInt16(accumulator >> UInt32(bits - 10) & 1023)
                        next += 1
                        bits -= 10
                        accumulator &= (1 << UInt32(bits)) - 1
                    }
                }
            }
            precondition(bits == 0 && next == Self.headerWords + valueWords)
            accumulator = 0
            let data = UnsafeBufferPointer(rebasing: words[..<next])
            let (a, b, c) = RS1024.checksum(data, extendable: extendable)
            words[next] = a
            words[next + 1] = b
            words[next + 2] = c
        }
        return mnemonic
    }

    /// Why a mnemonic is refused, for the message that names it.
    enum Defect: Error, Equatable {
        case tooShort(Int)
        case tooLong(Int)
        /// The value's words cannot hold whole bytes with at most 8 bits of padding.
        case length(Int)
        case checksum
        case padding
        case groupThreshold
    }

    /// Parses and checks a mnemonic's words.
    init(_ mnemonic: Mnemonic) throws(Defect) {
        let count = mnemonic.count
        guard count >= Self.minimumWords else { throw .tooShort(count) }
        guard count <= Self.maximumWords else { throw .tooLong(count) }
        let valueWords = count - Self.headerWords - Self.checksumWords
        let padding = 10 * valueWords % 16
        guard padding <= 8 else { throw .length(count) }
        let first = mnemonic.withValues { UInt32($0[0]) << 10 | UInt32($0[1]) }
        let extendable = first >> 4 & 1 == 1
        guard mnemonic.withValues({ RS1024.verify($0, extendable: extendable) }) else { throw .checksum }
        let second = mnemonic.withValues { UInt32($0[2]) << 10 | UInt32($0[3]) }
        identifier = UInt16(first >> 5)
        self.extendable = extendable
        exponent = Int(first & 15)
        groupIndex = Int(second >> 16 & 15)
        groupThreshold = Int(second >> 12 & 15) + 1
        groupCount = Int(second >> 8 & 15) + 1
        memberIndex = Int(second >> 4 & 15)
        memberThreshold = Int(second & 15) + 1
        guard groupThreshold <= groupCount else { throw .groupThreshold }
        let length = (10 * valueWords - padding) / 8
        let value = SecureBytes(count: length)
        // Padding bits that are not zero make a second encoding of the same share: refused.
        let paddingClear = mnemonic.withValues { words in
            value.withUnsafeMutableBytes { out -> Bool in
                var accumulator: UInt32 = 0, bits = 0, next = 0, skip = padding, clear = true
                for word in words[Self.headerWords..<Self.headerWords + valueWords] {
                    accumulator = accumulator << 10 | UInt32(word)
                    bits += 10
                    if skip > 0 {
                        clear = clear && accumulator >> UInt32(bits - skip) == 0
                        bits -= skip
                        skip = 0
                        accumulator &= (1 << UInt32(bits)) - 1
                    }
                    while bits >= 8 {
                        out[next] = UInt8(accumulator >> UInt32(bits - 8) & 0xff)
                        next += 1
                        bits -= 8
                        accumulator &= (1 << UInt32(bits)) - 1
                    }
                }
                return clear && next == length
            }
        }
        guard paddingClear else { throw .padding }
        self.value = value
    }

    init(identifier: UInt16, extendable: Bool, exponent: Int, groupIndex: Int, groupThreshold: Int, groupCount: Int,
         memberIndex: Int, memberThreshold: Int, value: SecureBytes) {
        self.identifier = identifier
        self.extendable = extendable
        self.exponent = exponent
        self.groupIndex = groupIndex
        self.groupThreshold = groupThreshold
        self.groupCount = groupCount
        self.memberIndex = memberIndex
        self.memberThreshold = memberThreshold
        self.value = value
    }
}
