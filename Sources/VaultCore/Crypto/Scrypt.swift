import CSodium

/// scrypt cost parameters. r = 8 and p = 1 are fixed by the formats; only N varies and is
/// stored, as log2(N), beside whatever it protects.
public struct ScryptParameters: Equatable, Sendable {
    /// log2 of the CPU/memory cost N.
    public let logN: UInt8

    /// r, fixed.
    public static let r: UInt32 = 8
    /// p, fixed.
    public static let p: UInt32 = 1
    /// N = 32768: about 32 MiB and a tenth of a second.
    public static let `default` = ScryptParameters(uncheckedLogN: Limits.scryptMinimumLogN)

    /// N itself.
    public var n: UInt64 { 1 << UInt64(logN) }

    /// Parameters for a given N, which must be a power of two in the accepted range.
    ///
    /// The upper bound is a denial-of-service guard, as in age: N is read from files that
    /// strangers send, and N = 2^30 would ask for 128 GiB.
    public init(n: UInt64) throws(VaultError) {
        guard n.nonzeroBitCount == 1 else {
            throw .kdfParametersOutOfRange("N = \(n) is not a power of two")
        }
        try self.init(logN: UInt8(n.trailingZeroBitCount))
    }

    /// Parameters for a given log2(N), bounded as ``init(n:)``.
    public init(logN: UInt8) throws(VaultError) {
        guard logN >= Limits.scryptMinimumLogN, logN <= Limits.scryptMaximumLogN else {
            throw .kdfParametersOutOfRange(
                "N = 2^\(logN), accepted 2^\(Limits.scryptMinimumLogN) to 2^\(Limits.scryptMaximumLogN)")
        }
        self.logN = logN
    }

    init(uncheckedLogN: UInt8) { logN = uncheckedLogN }

    /// Derives `length` bytes from `passphrase` and `salt`.
    func deriveKey(passphrase: SecureBytes, salt: [UInt8], length: Int = 32) -> SecureBytes {
        Self.derive(passphrase: passphrase, salt: salt, n: n, length: length)
    }

    /// The raw KDF, without bounds: reached only through checked parameters and from tests
    /// that run published vectors.
    static func derive(passphrase: SecureBytes, salt: [UInt8], n: UInt64, length: Int) -> SecureBytes {
        Sodium.ready
        let key = SecureBytes(count: length)
        let status = passphrase.withUnsafeBytes { pass in
            key.withUnsafeMutableBytes { out in
                crypto_pwhash_scryptsalsa208sha256_ll(
                    pass.bindMemory(to: UInt8.self).baseAddress!, pass.count,
                    salt, salt.count, n, r, p,
                    out.bindMemory(to: UInt8.self).baseAddress!, length)
            }
        }
        // Fails only when memory cannot be allocated; bounded N keeps that at 4 GiB.
        precondition(status == 0, "scrypt could not allocate its memory")
        return key
    }
}
