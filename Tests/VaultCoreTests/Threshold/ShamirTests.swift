import Testing
@testable import VaultCore
import VaultTestSupport

@Suite struct GF256Tests {
    @Test func matchesTheAESFieldAndInverts() {
        // FIPS-197 §4.2: {57} · {83} = {c1}, {57} · {13} = {fe}.
        #expect(GF256.mul(0x57, 0x83) == 0xc1)
        #expect(GF256.mul(0x57, 0x13) == 0xfe)
        #expect(GF256.inverse(0) == 0)
        for a in 1...255 {
            #expect(GF256.mul(UInt8(a), GF256.inverse(UInt8(a))) == 1)
        }
    }
}

@Suite struct ShamirTests {
    @Test(arguments: [(2, 2), (2, 3), (3, 5), (5, 5), (4, 7)])
    func everySubsetOfKRecombines(k: Int, n: Int) {
        let secret = SecureRandom().secureBytes(32)
        let shares = Shamir.split(secret, threshold: k, count: n, random: SecureRandom())
        for size in k...n {
            for subset in subsets(of: n, size: size) {
                let picked = subset.map { (x: UInt8($0 + 1), share: shares[$0]) }
                #expect(Shamir.combine(picked).constantTimeEquals(secret))
            }
        }
        // k-1 shares interpolate to something else (with overwhelming probability).
        for subset in subsets(of: n, size: k - 1) where k > 2 {
            let picked = subset.map { (x: UInt8($0 + 1), share: shares[$0]) }
            #expect(!Shamir.combine(picked).constantTimeEquals(secret))
        }
    }

    /// Regression for Core Secret's flaw: one coefficient set reused for every byte made
    /// share[j] ⊕ share[l] = secret[j] ⊕ secret[l] for any single share. With fresh
    /// coefficients the equality holds by chance, 1 time in 256.
    @Test func coefficientsAreFreshForEveryByte() {
        let secret = SecureBytes(copying: (0..<64).map { UInt8(($0 * 37 + 11) & 0xff) })
        var coincidences = 0, trials = 0
        for _ in 0..<50 {
            let share = Shamir.split(secret, threshold: 3, count: 5, random: SecureRandom())[0]
            share.withUnsafeBytes { y in
                secret.withUnsafeBytes { s in
                    for j in 0..<63 {
                        let l = j + 1
                        trials += 1
                        if y[j] ^ y[l] == s[j] ^ s[l] { coincidences += 1 }
                    }
                }
            }
        }
        // 3150 trials: about 12 coincidences expected; the flaw would give 3150.
        #expect(coincidences < trials / 50, "\(coincidences) of \(trials)")
    }

    /// One share of a one-byte secret (k = 2) is uniformly distributed: every observed
    /// value is compatible with every candidate secret.
    @Test func oneShareRevealsNothing() {
        let random = SeededRandom(seed: "shamir-uniform")
        var seen = Set<UInt8>()
        for _ in 0..<4096 {
            let share = Shamir.split(SecureBytes(copying: [0x42]), threshold: 2, count: 2, random: random)[0]
            seen.insert(share.withUnsafeBytes { $0[0] })
        }
        #expect(seen.count == 256)
    }

    /// k-1 shares of a one-byte secret (k = 3) leave all 256 candidates possible: for each
    /// candidate there is a third share that completes the set to it.
    @Test func kMinusOneSharesLeaveEveryCandidate() {
        let shares = Shamir.split(SecureBytes(copying: [0x99]), threshold: 3, count: 3, random: SecureRandom())
        var reachable = Set<UInt8>()
        for third in 0...255 {
            let completed = Shamir.combine([(1, shares[0]), (2, shares[1]), (3, SecureBytes(copying: [UInt8(third)]))])
            reachable.insert(completed.withUnsafeBytes { $0[0] })
        }
        #expect(reachable.count == 256)
    }

    /// Fixed randomness gives fixed shares: a vector for independent implementations
    /// (Docs/FORMAT.md). Share x=1 of 00 01 02 03 with k = 2 and coefficients c is s ⊕ c.
    @Test func vectorWithFixedCoefficients() {
        let fixed = FixedRandom([0xA0, 0xB1, 0xC2, 0xD3])
        let shares = Shamir.split(SecureBytes(copying: [0, 1, 2, 3]), threshold: 2, count: 3, random: fixed)
        #expect(shares[0].withUnsafeBytes(Array.init) == [0xA0, 0xB0, 0xC0, 0xD0])
        // x = 2: s ⊕ 2·c
        #expect(shares[1].withUnsafeBytes(Array.init) == [0, 1, 2, 3].enumerated().map { i, s in
            UInt8(s) ^ GF256.mul(2, [0xA0, 0xB1, 0xC2, 0xD3][i]) })
    }
}

/// Returns the given bytes, then zeros.
struct FixedRandom: RandomSource {
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        for i in 0..<buffer.count { buffer[i] = i < bytes.count ? bytes[i] : 0 }
    }
}
