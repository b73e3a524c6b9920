/// SLIP-39's checksum: a Reed-Solomon code over GF(1024) on the mnemonic's 10-bit words,
/// three words long, behind a customization string ("shamir", or "shamir_extendable" for
/// extendable sets). It detects any error in up to three words.
///
/// The words are a share, so the arithmetic takes no branch on them: each generator term
/// is masked in, not chosen.
enum RS1024 {
    private static let generator: [UInt32] = [
        0xe0e040, 0x1c1c080, 0x3838100, 0x7070200, 0xe0e0009, 0x1c0c2412, 0x38086c24, 0x3090fc48, 0x21b1f890, 0x3f3f120,
    ]

    /// The customization string fed in before the data.
    static func customization(extendable: Bool) -> [UInt8] { Array((extendable ? "shamir_extendable" : "shamir").utf8) }

    private static func step(_ check: UInt32, _ value: UInt32) -> UInt32 {
        let top = check >> 20
        var next = (check & 0xfffff) << 10 ^ value
        for i in 0..<10 { next ^= generator[i] & (0 &- ((top >> UInt32(i)) & 1)) }
        return next
    }

    private static func polymod(_ words: UnsafeBufferPointer<UInt16>, extendable: Bool, trailingZeros: Int = 0) -> UInt32 {
        var check: UInt32 = 1
        for byte in customization(extendable: extendable) { check = step(check, UInt32(byte)) }
        for word in words { check = step(check, UInt32(word)) }
        for _ in 0..<trailingZeros { check = step(check, 0) }
        return check
    }

    /// The three checksum words for `data` (the mnemonic's words before them).
    static func checksum(_ data: UnsafeBufferPointer<UInt16>, extendable: Bool) -> (UInt16, UInt16, UInt16) {
        let value = polymod(data, extendable: extendable, trailingZeros: 3) ^ 1
        return (UInt16(value >> 20 & 1023), UInt16(value >> 10 & 1023), UInt16(value & 1023))
    }

    /// Whether `words` (data and checksum) verify.
    static func verify(_ words: UnsafeBufferPointer<UInt16>, extendable: Bool) -> Bool {
        polymod(words, extendable: extendable) == 1
    }
}
