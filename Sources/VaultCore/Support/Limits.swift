/// Every bound VaultCore applies to what it reads, in one place.
enum Limits {
    /// scrypt N from 2^15 (the default) to 2^22 (4 GiB with r = 8): see ``ScryptParameters``.
    static let scryptMinimumLogN: UInt8 = 15
    static let scryptMaximumLogN: UInt8 = 22

    /// Image files read for QR codes: a phone photo is well below both.
    static let imageFileBytes = 64 << 20
    static let imagePixels = 64_000_000

    /// A passphrase file is read up to this size.
    static let passphraseBytes = 4096

    /// The largest ciphertext a bundle may describe: 1 TiB.
    static let maximumCiphertext: UInt64 = 1 << 40

    /// QR modules per side drawn in the terminal and in images.
    static let qrQuietZone = 4
}
