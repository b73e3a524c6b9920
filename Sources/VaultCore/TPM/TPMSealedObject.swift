import CSodium

/// A data object sealed by the TPM, as the keystore keeps it (Docs/FORMAT.md, "Sealed by
/// the TPM"): what it takes to load it again (the storage key's name, the TPM's public and
/// private parts), how it is authorized (a PIN, PCRs) and the PCR values it was sealed to,
/// so that a refusal can say which PCR changed.
///
/// Layout: flags (1: bit 0 a PIN) ‖ PCR mask (4, big-endian, SHA-256 PCRs 0 to 23) ‖ PIN salt
/// (16) ‖ storage key name (34) ‖ 32 bytes for each PCR in the mask, lowest first ‖
/// TPM2B_PUBLIC ‖ TPM2B_PRIVATE (each its 2-byte big-endian size and that many bytes).
struct TPMSealedObject: Equatable {
    /// Whether a PIN is the object's authorization value.
    let hasPIN: Bool
    let pcrs: PCRSelection
    /// Salts the PIN's authorization value, so equal PINs give unrelated values.
    let pinSalt: [UInt8]
    /// The TPM name of the storage primary key the object was sealed under.
    let parentName: [UInt8]
    /// The PCR values the policy holds, 32 bytes each.
    let pcrValues: [[UInt8]]
    /// The marshalled TPM2B_PUBLIC and TPM2B_PRIVATE.
    let publicPart: [UInt8]
    let privatePart: [UInt8]

    static let saltLength = 16
    static let nameLength = 34
    /// Far above any real object's parts (about 80 and 160 bytes), and below the 1 KiB
    /// vault_tpm reads into.
    static let largestPart = 1000

    var encoded: [UInt8] {
        var out: [UInt8] = [hasPIN ? 1 : 0]
        out += withUnsafeBytes(of: pcrs.mask.bigEndian, Array.init)
        out += pinSalt + parentName
        for value in pcrValues { out += value }
        return out + publicPart + privatePart
    }

    init(hasPIN: Bool, pcrs: PCRSelection, pinSalt: [UInt8], parentName: [UInt8], pcrValues: [[UInt8]],
         publicPart: [UInt8], privatePart: [UInt8]) {
        (self.hasPIN, self.pcrs, self.pinSalt, self.parentName) = (hasPIN, pcrs, pinSalt, parentName)
        (self.pcrValues, self.publicPart, self.privatePart) = (pcrValues, publicPart, privatePart)
    }

    /// Seals `secret` on `tpm`, with `pin` (salted afresh; nil for none) as its authorization
    /// and a policy on `pcrs` when there are any.
    static func seal(
        _ secret: SecureBytes, pin: SecureBytes?, pcrs: PCRSelection, on tpm: TPMConnection, random: some RandomSource
    ) throws(VaultError) -> TPMSealedObject {
        let pinSalt = random.bytes(saltLength)
        // The object's auth value comes from the salt, which is known only once sealed: a
        // placeholder object gives it, with the same salt.
        let auth = TPMSealedObject(hasPIN: pin != nil, pcrs: pcrs, pinSalt: pinSalt, parentName: [], pcrValues: [],
                                   publicPart: [], privatePart: []).authValue(pin: pin)
        let sealed = try tpm.seal(secret, auth: auth, pcrs: pcrs)
        return TPMSealedObject(hasPIN: pin != nil, pcrs: pcrs, pinSalt: pinSalt, parentName: sealed.parentName,
                               pcrValues: sealed.pcrValues, publicPart: sealed.publicPart, privatePart: sealed.privatePart)
    }

    /// Reads an object from the front of `reader`, strictly: unknown flags, PCRs past 23 and
    /// parts of impossible sizes are refused.
    init(reading reader: inout ByteReader) throws(ByteReader.Failure) {
        let flags = try reader.u8()
        guard flags & ~1 == 0 else { throw .invalid("the TPM seal has unknown flags \(flags)") }
        hasPIN = flags & 1 == 1
        let mask = try reader.u32()
        guard mask < 1 << UInt32(PCRSelection.count) else { throw .invalid("the TPM seal names PCRs past 23") }
        pcrs = PCRSelection(mask: mask)
        pinSalt = try reader.raw(Self.saltLength)
        parentName = try reader.raw(Self.nameLength)
        var values: [[UInt8]] = []
        for _ in pcrs.indices { values.append(try reader.raw(32)) }
        pcrValues = values
        publicPart = try Self.sizedPart(&reader)
        privatePart = try Self.sizedPart(&reader)
    }

    private static func sizedPart(_ reader: inout ByteReader) throws(ByteReader.Failure) -> [UInt8] {
        let length = Int(try reader.u16())
        guard length > 0, length + 2 <= largestPart else { throw .invalid("a TPM part has \(length) bytes") }
        return [UInt8(length >> 8), UInt8(length & 0xFF)] + (try reader.raw(length))
    }

    /// The object's authorization value for `pin`: BLAKE2b-256 keyed by the salt over a
    /// domain and the PIN, with trailing zero bytes removed (the TPM removes them from an
    /// authorization value, and tpm2-tss versions differ on whether they do too: removing
    /// them here makes both sides agree whatever the version).
    func authValue(pin: SecureBytes?) -> SecureBytes? {
        guard hasPIN, let pin else { return nil }
        Sodium.ready
        let value = SecureBytes(count: 32)
        let domain = Array("vault/v1/tpm-pin".utf8)
        let state = UnsafeMutableRawPointer.allocate(byteCount: crypto_generichash_statebytes(), alignment: 64)
        defer {
            sodium_memzero(state, crypto_generichash_statebytes())
            state.deallocate()
        }
        _ = crypto_generichash_init(OpaquePointer(state), pinSalt, pinSalt.count, 32)
        _ = crypto_generichash_update(OpaquePointer(state), domain, UInt64(domain.count))
        pin.withUnsafeBytes { _ = crypto_generichash_update(OpaquePointer(state), $0.bindMemory(to: UInt8.self).baseAddress, UInt64($0.count)) }
        value.withUnsafeMutableBytes { _ = crypto_generichash_final(OpaquePointer(state), $0.bindMemory(to: UInt8.self).baseAddress!, 32) }
        let length = value.withUnsafeBytes { bytes in (bytes.lastIndex { $0 != 0 } ?? -1) + 1 }
        return value.slice(0..<length)
    }
}
