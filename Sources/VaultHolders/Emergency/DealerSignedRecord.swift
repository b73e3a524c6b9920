import VaultCore
/// What the two §21 records (``EmergencyRule``, ``EmergencyDecision``) share when read:
/// the version and the length checked first, the fields read with every failure in words,
/// and the signature of the dealer the record names, over everything before it.
enum DealerSignedRecord {
    static let version: UInt8 = 1

    /// Reads `bytes` as `what` (`length` bytes in all): `fields` reads what follows the
    /// version up to the 64-byte signature, and `dealer` says whose signature it must be.
    static func read<Fields>(_ bytes: [UInt8], what: String, length: Int, domain: [UInt8], fields: (inout ByteReader) throws -> Fields,
                             dealer: (Fields) -> KeyCard) throws(VaultError) -> (fields: Fields, signature: [UInt8]) {
        func fail(_ detail: String) -> VaultError { .malformed(what: what, detail: detail) }
        // The version first: a newer record may be longer, and "unknown version" says to upgrade.
        guard let first = bytes.first else { throw fail("it is empty") }
        guard first == version else { throw .unsupportedVersion(what: what, version: first, supported: version) }
        guard bytes.count == length else { throw fail("it is \(bytes.count) bytes, not \(length)") }
        var r = ByteReader(bytes)
        let read: Fields, signature: [UInt8]
        do {
            _ = try r.u8()
            read = try fields(&r)
            signature = try r.raw(64)
            try r.end()
        } catch {
            throw VaultError.reading(what, error)
        }
        guard dealer(read).verify(signature: signature, of: domain + Array(bytes.prefix(length - 64))) else {
            throw .badSignature(what: "\(what) (it is not signed by the dealer it names)")
        }
        return (read, signature)
    }
}
