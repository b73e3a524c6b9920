import CSodium

/// Secret bytes sealed under a passphrase: scrypt, then `crypto_secretbox`.
///
/// Layout: version `0x01` ‖ log2(N) (1) ‖ salt (32) ‖ nonce (24) ‖ secretbox (16 + plaintext).
/// Docs/FORMAT.md, "Passphrase seal".
enum PassphraseSeal {
    static let version: UInt8 = 1
    static let saltLength = 32
    static let headerLength = 2 + saltLength + Int(crypto_secretbox_NONCEBYTES)

    static func seal(
        _ secret: SecureBytes, passphrase: SecureBytes, parameters: ScryptParameters,
        random: some RandomSource = SecureRandom()
    ) -> [UInt8] {
        let salt = random.bytes(saltLength)
        let nonce = random.bytes(Int(crypto_secretbox_NONCEBYTES))
        let key = parameters.deriveKey(passphrase: passphrase, salt: salt)
        var box = [UInt8](repeating: 0, count: secret.count + Int(crypto_secretbox_MACBYTES))
        secret.withUnsafeBytes { plain in
            key.withUnsafeBytes { k in
                _ = crypto_secretbox_easy(
                    &box, plain.bindMemory(to: UInt8.self).baseAddress!, UInt64(plain.count),
                    nonce, k.bindMemory(to: UInt8.self).baseAddress!)
            }
        }
        return [version, parameters.logN] + salt + nonce + box
    }

    /// Opens a seal. The stored N is bounded before any work is done.
    static func open(_ sealed: [UInt8], passphrase: SecureBytes) throws(VaultError) -> SecureBytes {
        guard sealed.count >= headerLength + Int(crypto_secretbox_MACBYTES) else {
            throw .keystoreCorrupt("sealed keys are truncated")
        }
        guard sealed[0] == version else {
            throw .keystoreCorrupt("unknown passphrase seal version \(sealed[0])")
        }
        let parameters = try ScryptParameters(logN: sealed[1])
        let salt = Array(sealed[2..<2 + saltLength])
        let nonce = Array(sealed[2 + saltLength..<headerLength])
        let box = Array(sealed[headerLength...])
        let key = parameters.deriveKey(passphrase: passphrase, salt: salt)
        let plain = SecureBytes(count: box.count - Int(crypto_secretbox_MACBYTES))
        let status = plain.withUnsafeMutableBytes { out in
            key.withUnsafeBytes { k in
                crypto_secretbox_open_easy(
                    out.bindMemory(to: UInt8.self).baseAddress!, box, UInt64(box.count),
                    nonce, k.bindMemory(to: UInt8.self).baseAddress!)
            }
        }
        guard status == 0 else { throw .wrongPassphrase }
        return plain
    }

    /// The parameters a seal was made with, for display.
    static func parameters(of sealed: [UInt8]) -> ScryptParameters? {
        sealed.count > 1 ? try? ScryptParameters(logN: sealed[1]) : nil
    }
}
