/// Arithmetic in GF(2^8) with the AES polynomial x^8 + x^4 + x^3 + x + 1 (0x11b).
///
/// Constant time: no table indexed by a value, no branch on a value. Shamir runs these on
/// secret bytes, where a cache-timing leak would reveal the data key.
enum GF256 {
    /// a · b by shift-and-add, with masks in place of branches.
    @inline(__always)
    static func mul(_ a: UInt8, _ b: UInt8) -> UInt8 {
        var a = a, b = b, product: UInt8 = 0
        for _ in 0..<8 {
            product ^= a & (0 &- (b & 1))
            a = (a << 1) ^ (0x1b & (0 &- (a >> 7)))
            b >>= 1
        }
        return product
    }

    /// a^-1 = a^254 (Fermat), by a fixed sequence of squarings and products; 0 maps to 0.
    static func inverse(_ a: UInt8) -> UInt8 {
        // 254 = 0b11111110: square-and-multiply over its bits, always the same operations.
        var result: UInt8 = 1
        var power = a
        for bit in 0..<8 {
            let factor = mul(result, power)
            let take = 0 &- UInt8((254 >> bit) & 1)
            result = (factor & take) | (result & ~take)
            power = mul(power, power)
        }
        return result
    }
}
