/// SLIP-39's own Shamir layer, over the same field as vault's (GF(2^8), the AES polynomial,
/// constant-time ``GF256``) but not vault's x-coordinates: a share's index is its x, from 0,
/// the shared secret sits at x = 255 and a digest of it at x = 254. So any T shares
/// rebuild the secret, and the digest tells a right combination from a wrong one.
enum SLIP39Shamir {
    static let secretIndex: UInt8 = 255
    static let digestIndex: UInt8 = 254
    static let digestLength = 4

    /// The value at `x` of the polynomials (one a byte) through `points`; Lagrange's
    /// formula. The x are public; the values are secret and go through constant-time
    /// arithmetic only.
    static func interpolate(_ points: [(x: UInt8, value: SecureBytes)], at x: UInt8) -> SecureBytes {
        precondition(!points.isEmpty && Set(points.map(\.x)).count == points.count)
        let length = points[0].value.count
        if let known = points.first(where: { $0.x == x }) { return known.value.slice(0..<length) }
        // basis_i = Π_{j≠i} (x - x_j) / (x_i - x_j); subtraction is XOR.
        let basis = points.indices.map { i -> UInt8 in
            var numerator: UInt8 = 1, denominator: UInt8 = 1
            for j in points.indices where j != i {
                numerator = GF256.mul(numerator, x ^ points[j].x)
                denominator = GF256.mul(denominator, points[i].x ^ points[j].x)
            }
            return GF256.mul(numerator, GF256.inverse(denominator))
        }
        let out = SecureBytes(count: length)
        out.withUnsafeMutableBytes { out in
            for (i, point) in points.enumerated() {
                precondition(point.value.count == length)
                point.value.withUnsafeBytes { y in
                    for position in 0..<length { out[position] ^= GF256.mul(basis[i], y[position]) }
                }
            }
        }
        return out
    }

    /// The digest share: the first 4 bytes of HMAC-SHA-256(key = R, secret) ‖ R.
    private static func digest(random: UnsafeRawBufferPointer, secret: SecureBytes) -> SecureBytes {
        let mac = SecureBytes(count: 32)
        mac.withUnsafeMutableBytes { mac in
            secret.withUnsafeBytes { KeyDerivation.hmacSHA256(key: random, message: $0, into: mac) }
        }
        let out = SecureBytes(count: digestLength + random.count)
        out.withUnsafeMutableBytes { out in
            mac.withUnsafeBytes { out.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: digestLength) }
            (out.baseAddress! + digestLength).copyMemory(from: random.baseAddress!, byteCount: random.count)
        }
        return out
    }

    /// SplitSecret(T, N, S): N shares at indices 0…N-1. T-2 of them random, the others on
    /// the polynomials through those, the digest at 254 and the secret at 255.
    static func split(_ secret: SecureBytes, threshold: Int, count: Int, random: some RandomSource) -> [SecureBytes] {
        precondition(threshold >= 1 && threshold <= count && count <= 16 && secret.count >= 16)
        if threshold == 1 { return (0..<count).map { _ in secret.slice(0..<secret.count) } }
        let randomShares = (0..<threshold - 2).map { _ in random.secureBytes(secret.count) }
        let digestRandom = random.secureBytes(secret.count - digestLength)
        let digestShare = digestRandom.withUnsafeBytes { digest(random: $0, secret: secret) }
        let base = randomShares.enumerated().map { (x: UInt8($0.offset), value: $0.element) }
            + [(x: digestIndex, value: digestShare), (x: secretIndex, value: secret)]
        return randomShares + (threshold - 2..<count).map { interpolate(base, at: UInt8($0)) }
    }

    /// RecoverSecret(T, shares): the secret at 255, once the digest at 254 matches it; nil
    /// when it does not (shares of different sets, or one altered in a way the checksum let
    /// through).
    static func recover(threshold: Int, _ shares: [(x: UInt8, value: SecureBytes)]) -> SecureBytes? {
        precondition(!shares.isEmpty)
        if threshold == 1 { return shares[0].value.slice(0..<shares[0].value.count) }
        let secret = interpolate(shares, at: secretIndex)
        let digestShare = interpolate(shares, at: digestIndex)
        let expected = digestShare.withUnsafeBytes { share in
            digest(random: UnsafeRawBufferPointer(rebasing: share[digestLength...]), secret: secret)
        }
        return expected.slice(0..<digestLength).constantTimeEquals(digestShare.slice(0..<digestLength)) ? secret : nil
    }
}
