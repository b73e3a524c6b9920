import CSodium

/// An X25519 key pair made for one `crypto_box` and then dropped, as age does for each
/// recipient: what it seals, only the recipient's secret key opens. A box from a long-term
/// key could also be opened by that key's owner, forever (``ShareBundle``).
struct OneTimeKey {
    let publicKey: [UInt8]
    /// In locked memory, wiped when the last reference goes.
    let secretKey: SecureBytes

    /// A fresh key pair from `random` (seeded in tests, so that vectors are reproducible).
    init(random: some RandomSource) {
        let seed = random.secureBytes(Int(crypto_box_SEEDBYTES))
        var publicKey = [UInt8](repeating: 0, count: Int(crypto_box_PUBLICKEYBYTES))
        let secretKey = SecureBytes(count: Int(crypto_box_SECRETKEYBYTES))
        seed.withUnsafeBytes { s in
            secretKey.withUnsafeMutableBytes { sk in
                _ = crypto_box_seed_keypair(&publicKey, sk.bindMemory(to: UInt8.self).baseAddress!,
                                            s.bindMemory(to: UInt8.self).baseAddress!)
            }
        }
        self.publicKey = publicKey
        self.secretKey = secretKey
    }
}
