import CSodium

/// Shamir's secret sharing over GF(2^8), byte by byte.
///
/// Share x (1…n, never 0) of a secret is, for every byte position, the value at x of a
/// polynomial of degree k-1 whose constant term is the secret byte. The other k-1
/// coefficients are drawn afresh **for every byte**: Core Secret's C library drew one set
/// and reused it across bytes, so one share revealed the XOR of any two secret bytes.
enum Shamir {
    /// n shares of `secret`, the share for x = i + 1 at position i.
    static func split(
        _ secret: SecureBytes, threshold k: Int, count n: Int, random: some RandomSource
    ) -> [SecureBytes] {
        precondition(k >= 2 && k <= n && n <= 255)
        let length = secret.count
        // (k-1) fresh random coefficients per secret byte, in locked memory.
        let coefficients = random.secureBytes(length * (k - 1))
        let shares = (0..<n).map { _ in SecureBytes(count: length) }
        secret.withUnsafeBytes { s in
            coefficients.withUnsafeBytes { c in
                for (index, share) in shares.enumerated() {
                    let x = UInt8(index + 1)
                    share.withUnsafeMutableBytes { out in
                        for position in 0..<length {
                            // Horner: ((c_{k-1} x + c_{k-2}) x + …) x + secret
                            var y: UInt8 = 0
                            for degree in stride(from: k - 1, through: 1, by: -1) {
                                y = GF256.mul(y, x) ^ c[position * (k - 1) + degree - 1]
                            }
                            out[position] = GF256.mul(y, x) ^ s[position]
                        }
                    }
                }
            }
        }
        return shares
    }

    /// The secret from k or more shares at distinct x (1…255); Lagrange interpolation at 0.
    /// The x are public, the shares secret: both go through constant-time arithmetic.
    static func combine(_ shares: [(x: UInt8, share: SecureBytes)]) -> SecureBytes {
        precondition(!shares.isEmpty)
        let length = shares[0].share.count
        precondition(shares.allSatisfy { $0.share.count == length && $0.x != 0 })
        precondition(Set(shares.map(\.x)).count == shares.count)
        // l_j(0) = Π_{m≠j} x_m / (x_m - x_j); subtraction is XOR in GF(2^8).
        let basis = shares.indices.map { j -> UInt8 in
            var numerator: UInt8 = 1, denominator: UInt8 = 1
            for m in shares.indices where m != j {
                numerator = GF256.mul(numerator, shares[m].x)
                denominator = GF256.mul(denominator, shares[m].x ^ shares[j].x)
            }
            return GF256.mul(numerator, GF256.inverse(denominator))
        }
        let secret = SecureBytes(count: length)
        secret.withUnsafeMutableBytes { out in
            for (j, entry) in shares.enumerated() {
                entry.share.withUnsafeBytes { y in
                    for position in 0..<length { out[position] ^= GF256.mul(basis[j], y[position]) }
                }
            }
        }
        return secret
    }
}
