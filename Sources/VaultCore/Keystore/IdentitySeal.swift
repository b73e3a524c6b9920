import CSodium

/// The identity's secret sealed by its factors (Docs/FORMAT.md, "Sealed by the TPM"): the
/// TPM, and a passphrase as well when the user wants both. Each factor gives 32 bytes (the
/// TPM unseals a random key, scrypt derives one from the passphrase); BLAKE2b over the
/// header and those bytes keys a secretbox around the 64 secret bytes. So every factor is
/// needed, none can be tried alone offline, and the header cannot be altered unnoticed.
/// Another factor (a FIDO2 key's hmac-secret) would be one more flag and 32 more bytes.
///
/// Layout: version `0x01` ‖ factors (1: bit 0 the TPM, bit 1 a passphrase) ‖ [log2(N) (1)
/// ‖ salt (32), with a passphrase] ‖ [the TPM's object (``TPMSealedObject``), with the TPM]
/// ‖ nonce (24) ‖ secretbox (16 + 64).
struct IdentitySeal {
    struct Factors: OptionSet {
        let rawValue: UInt8
        static let tpm = Factors(rawValue: 1)
        static let passphrase = Factors(rawValue: 2)
    }

    static let version: UInt8 = 1
    static let saltLength = 32
    static let keyLength = 32

    let factors: Factors
    let scrypt: ScryptParameters?
    let salt: [UInt8]
    let tpm: TPMSealedObject?
    /// Everything before the nonce, which the key covers.
    let header: [UInt8]
    let nonce: [UInt8]
    let box: [UInt8]

    /// Parses a seal strictly: an unknown version or factor, a seal without the TPM (none
    /// is written), and any byte past the box are refused.
    init(_ bytes: [UInt8]) throws(VaultError) {
        var reader = ByteReader(bytes)
        do throws(ByteReader.Failure) {
            let version = try reader.u8()
            guard version == Self.version else { throw .invalid("unknown identity seal version \(version)") }
            factors = Factors(rawValue: try reader.u8())
            guard factors.rawValue & ~3 == 0, factors.contains(.tpm) else {
                throw .invalid("the identity seal names factors \(factors.rawValue) this vault does not know")
            }
            if factors.contains(.passphrase) {
                let logN = try reader.u8()
                do { scrypt = try ScryptParameters(logN: logN) } catch { throw .invalid("\(error)") }
                salt = try reader.raw(Self.saltLength)
            } else {
                (scrypt, salt) = (nil, [])
            }
            tpm = factors.contains(.tpm) ? try TPMSealedObject(reading: &reader) : nil
            header = Array(bytes.prefix(reader.offset))
            nonce = try reader.raw(Int(crypto_secretbox_NONCEBYTES))
            box = try reader.raw(Identity.secretLength + Int(crypto_secretbox_MACBYTES))
            try reader.end()
        } catch {
            throw .keystoreCorrupt("the sealed keys: \(error)")
        }
    }

    /// Seals `secret`: the TPM seals a fresh random key (with `pin` as its authorization and
    /// a policy on `pcrs`), and `passphrase`, when given, is the second factor.
    static func seal(
        _ secret: SecureBytes, tpm selection: TPMSelection, pin: SecureBytes?, pcrs: PCRSelection,
        passphrase: SecureBytes?, scrypt: ScryptParameters, random: some RandomSource
    ) throws(VaultError) -> [UInt8] {
        var factors: Factors = .tpm
        var header: [UInt8] = []
        var passphraseKey: SecureBytes?
        if let passphrase {
            guard passphrase.count > 0 else { throw .empty(what: "passphrase") }
            factors.insert(.passphrase)
            let salt = random.bytes(saltLength)
            header = [scrypt.logN] + salt
            passphraseKey = scrypt.deriveKey(passphrase: passphrase, salt: salt)
        }
        let tpmKey = random.secureBytes(keyLength)
        let object = try TPMSealedObject.seal(tpmKey, pin: pin, pcrs: pcrs, on: TPMConnection(selection), random: random)
        header = [version, factors.rawValue] + header + object.encoded
        let nonce = random.bytes(Int(crypto_secretbox_NONCEBYTES))
        let key = boxKey(header: header, tpmKey: tpmKey, passphraseKey: passphraseKey)
        var box = [UInt8](repeating: 0, count: secret.count + Int(crypto_secretbox_MACBYTES))
        secret.withUnsafeBytes { plain in
            key.withUnsafeBytes { k in
                _ = crypto_secretbox_easy(&box, plain.bindMemory(to: UInt8.self).baseAddress!, UInt64(plain.count), nonce,
                                          k.bindMemory(to: UInt8.self).baseAddress!)
            }
        }
        return header + nonce + box
    }

    /// Opens the seal: the TPM first (it checks the PIN, counting failures), then the
    /// passphrase. With both factors, a passphrase that does not open the box is the wrong
    /// one: the TPM's part was right, or the TPM would have refused.
    func open(selection: TPMSelection, pin: SecureBytes?, passphrase: SecureBytes?) throws(VaultError) -> SecureBytes {
        guard let tpm else { throw .keystoreCorrupt("the sealed keys have no TPM part") }
        if tpm.hasPIN && pin == nil { throw .pinRequired }
        if factors.contains(.passphrase) && passphrase == nil { throw .passphraseRequired }
        let tpmKey = try TPMConnection(selection).unseal(tpm, auth: tpm.authValue(pin: pin))
        guard tpmKey.count == Self.keyLength else { throw .keystoreCorrupt("the TPM unsealed \(tpmKey.count) bytes, not \(Self.keyLength)") }
        let passphraseKey = passphrase.flatMap { passphrase in scrypt.map { $0.deriveKey(passphrase: passphrase, salt: salt) } }
        let key = Self.boxKey(header: header, tpmKey: tpmKey, passphraseKey: passphraseKey)
        let plain = SecureBytes(count: Identity.secretLength)
        let status = plain.withUnsafeMutableBytes { out in
            key.withUnsafeBytes { k in
                crypto_secretbox_open_easy(out.bindMemory(to: UInt8.self).baseAddress!, box, UInt64(box.count), nonce,
                                           k.bindMemory(to: UInt8.self).baseAddress!)
            }
        }
        guard status == 0 else {
            throw factors.contains(.passphrase) ? .wrongPassphrase : .keystoreCorrupt("the sealed keys do not open with what the TPM unsealed")
        }
        return plain
    }

    /// BLAKE2b-256 keyed by a domain, over the header and each factor's key in flag order,
    /// computed in locked memory.
    private static func boxKey(header: [UInt8], tpmKey: SecureBytes, passphraseKey: SecureBytes?) -> SecureBytes {
        let hash = Sodium.Blake2b(key: "vault/v1/identity-seal")
        header.withUnsafeBytes { hash.update($0) }
        tpmKey.withUnsafeBytes { hash.update($0) }
        passphraseKey?.withUnsafeBytes { hash.update($0) }
        let key = SecureBytes(count: keyLength)
        key.withUnsafeMutableBytes { hash.finish(into: $0) }
        return key
    }
}
