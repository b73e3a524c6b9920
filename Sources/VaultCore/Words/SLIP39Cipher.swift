/// SLIP-39's encryption of the master secret under the passphrase: a four-round Feistel
/// network whose round function is PBKDF2-HMAC-SHA-256 (OpenSSL's), `2500 << e` iterations
/// a round. It is a permutation: any master secret has an encryption, which is what lets a
/// dealer choose the secret (vault's own) rather than take a random one.
///
/// A wrong passphrase is not detected: it decrypts to another secret, as the standard means
/// it to (plausible deniability).
enum SLIP39Cipher {
    /// Iterations over the four rounds, at exponent 0.
    static let baseIterations = 10_000
    static let rounds = 4

    /// The salt's prefix: "shamir" ‖ id (2 bytes) for a set that is not extendable; nothing
    /// for an extendable one, whose encryption is then the same for every set of the secret.
    static func saltPrefix(identifier: UInt16, extendable: Bool) -> [UInt8] {
        extendable ? [] : Array("shamir".utf8) + [UInt8(identifier >> 8), UInt8(identifier & 0xff)]
    }

    /// EMS = Encrypt(MS, passphrase, e, id, ext).
    static func encrypt(_ secret: SecureBytes, passphrase: SecureBytes, exponent: Int, identifier: UInt16, extendable: Bool) -> SecureBytes {
        feistel(secret, passphrase: passphrase, exponent: exponent, salt: saltPrefix(identifier: identifier, extendable: extendable),
                 order: Array(0..<rounds))
    }

    /// MS = Decrypt(EMS, passphrase, e, id, ext): the rounds in reverse order.
    static func decrypt(_ encrypted: SecureBytes, passphrase: SecureBytes, exponent: Int, identifier: UInt16, extendable: Bool) -> SecureBytes {
        feistel(encrypted, passphrase: passphrase, exponent: exponent, salt: saltPrefix(identifier: identifier, extendable: extendable),
                order: Array((0..<rounds).reversed()))
    }

    private static func feistel(_ input: SecureBytes, passphrase: SecureBytes, exponent: Int, salt prefix: [UInt8], order: [Int]) -> SecureBytes {
        precondition(input.count % 2 == 0 && (0...15).contains(exponent))
        let half = input.count / 2
        let iterations = (baseIterations << exponent) / rounds
        var left = input.slice(0..<half), right = input.slice(half..<input.count)
        // The round's password is i ‖ passphrase and its salt prefix ‖ R, both secret: they
        // are built in locked memory.
        let password = SecureBytes(count: 1 + passphrase.count)
        password.withUnsafeMutableBytes { out in
            passphrase.withUnsafeBytes { if $0.count > 0 { (out.baseAddress! + 1).copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
        }
        let salt = SecureBytes(count: prefix.count + half)
        salt.withUnsafeMutableBytes { out in
            for (offset, byte) in prefix.enumerated() { out[offset] = byte }
        }
        let round = SecureBytes(count: half)
        for i in order {
            password.withUnsafeMutableBytes { $0[0] = UInt8(i) }
            salt.withUnsafeMutableBytes { out in
                right.withUnsafeBytes { (out.baseAddress! + prefix.count).copyMemory(from: $0.baseAddress!, byteCount: half) }
            }
            password.withUnsafeBytes { password in
                salt.withUnsafeBytes { salt in
                    round.withUnsafeMutableBytes { round in
                        KeyDerivation.pbkdf2(password: password, salt: salt, iterations: iterations, into: round)
                    }
                }
            }
            // (L, R) = (R, L xor F(i, R))
            let next = SecureBytes(count: half)
            next.withUnsafeMutableBytes { out in
                left.withUnsafeBytes { l in
                    round.withUnsafeBytes { f in
                        for position in 0..<half { out[position] = l[position] ^ f[position] }
                    }
                }
            }
            left = right
            right = next
        }
        // The result is R ‖ L.
        let output = SecureBytes(count: input.count)
        output.withUnsafeMutableBytes { out in
            right.withUnsafeBytes { out.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: half) }
            left.withUnsafeBytes { (out.baseAddress! + half).copyMemory(from: $0.baseAddress!, byteCount: half) }
        }
        return output
    }
}
