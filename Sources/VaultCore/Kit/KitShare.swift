import Foundation

/// One holder's share as a recovery kit prints it (Docs/FORMAT.md, "Recovery kits"): all
/// that recovery needs from this holder, with no keystore and no identity:
///
///     "VLTK" ‖ version 0x01 ‖ prefix length (2) ‖ bundle prefix ‖ key share (32)
///     ‖ piece length (4) ‖ piece ‖ name length (1) ‖ holder's name (UTF-8)
///
/// The bundle prefix is the dealer's signed header as the bundle carries it (FORMAT §9),
/// so the dealer's signature, the commitments and the proof-of-possession keys come along:
/// recovery checks the key share against its proof key and the piece against its
/// commitment, as it checks a released piece. The key share is in the clear: the paper is
/// the share, as a SLIP-39 mnemonic is (Docs/SECURITY.md, "Printed recovery kits"). The name
/// is the kit maker's word for its holder, shown and never trusted.
public struct KitShare {
    static let magic = Array("VLTK".utf8)
    static let version: UInt8 = 1
    /// A holder's name on the kit, at most.
    static let maximumName = 64

    /// The dealer's signed header, this holder's.
    public let header: BundleHeader
    let prefix: [UInt8]
    let keyShare: SecureBytes
    let piece: [UInt8]
    /// The holder's name as the kit's maker gave it (unsigned).
    public let holderName: String

    /// The payload's length for a piece of `pieceLength` bytes.
    static func length(prefix: Int, pieceLength: UInt64, name: Int) -> UInt64 {
        UInt64(magic.count + 1 + 2 + prefix + 32 + 4) + pieceLength + UInt64(1 + name)
    }

    /// The length of each holder's piece of `secret`.
    public static func pieceLength(of secret: StoredSecret) -> UInt64 { secret.header.pieceLength }

    /// Whether this holder's share of `secret` fits on paper (``KitCodes/maximumCodes``).
    public static func fitsOnPaper(_ secret: StoredSecret, name: String) -> Bool {
        length(prefix: secret.prefix.count, pieceLength: secret.header.pieceLength, name: min(maximumName, name.utf8.count))
            <= UInt64(KitCodes.maximumPayload)
    }

    /// This keystore's own share of `secret`, opened with `identity`: the key share out of
    /// its box, the piece out of its file, checked against the dealer's commitment.
    public static func own(_ secret: StoredSecret, keystore: Keystore, identity: Identity, name: String) throws -> KitShare {
        let header = secret.header
        guard fitsOnPaper(secret, name: name) else {
            throw VaultError.invalidKit("secret \(header.secretIDHex.prefix(16))'s piece of \(header.pieceLength) bytes does not fit on paper")
        }
        let keyShare = try ShareBundle.openBox(secret.box, header: header, holder: identity)
        var piece = [UInt8](repeating: 0, count: Int(header.pieceLength))
        try keystore.withPiece(secret) { source in
            let count = try piece.withUnsafeMutableBytes { try source.fill($0) }
            guard count == piece.count, try source.readFully(1).isEmpty else {
                throw VaultError.keystoreCorrupt("the stored piece is not as long as its header says")
            }
        }
        let hasher = header.commitmentHasher()
        piece.withUnsafeBytes { hasher.update($0) }
        guard Sodium.equal(hasher.finish(), header.commitments[header.holderIndex - 1]) else {
            throw VaultError.keystoreCorrupt("the stored piece does not match its commitment")
        }
        let trimmed = String(decoding: Array(name.utf8.prefix(maximumName)), as: UTF8.self)
        return KitShare(header: header, prefix: secret.prefix, keyShare: keyShare, piece: piece, holderName: trimmed)
    }

    init(header: BundleHeader, prefix: [UInt8], keyShare: SecureBytes, piece: [UInt8], holderName: String) {
        self.header = header
        self.prefix = prefix
        self.keyShare = keyShare
        self.piece = piece
        self.holderName = holderName
    }

    /// The payload, in locked memory (it holds the key share).
    func encoded() -> SecureBytes {
        let name = Array(holderName.utf8)
        let out = SecureBytes(count: Int(Self.length(prefix: prefix.count, pieceLength: UInt64(piece.count), name: name.count)))
        out.withUnsafeMutableBytes { out in
            var offset = 0
            func put(_ bytes: some Collection<UInt8>) { for byte in bytes { out[offset] = byte; offset += 1 } }
            put(Self.magic)
            put([Self.version, UInt8(prefix.count >> 8), UInt8(prefix.count & 0xff)])
            put(prefix)
            keyShare.withUnsafeBytes { (out.baseAddress! + offset).copyMemory(from: $0.baseAddress!, byteCount: 32) }
            offset += 32
            put((0..<4).map { UInt8(truncatingIfNeeded: piece.count >> (24 - 8 * $0)) })
            put(piece)
            put([UInt8(name.count)])
            put(name)
            precondition(offset == out.count)
        }
        return out
    }

    /// Parses a payload: strict (its version, every length, no trailing byte), and the
    /// dealer's signature verified; the shares' own checks are ``check()``'s.
    init(parsing payload: SecureBytes) throws(VaultError) {
        func fail(_ detail: String) -> VaultError { .invalidKit("its share \(detail)") }
        let parsed: (prefix: [UInt8], keyAt: Int, piece: [UInt8], name: [UInt8]) = try payload.withUnsafeBytes { (bytes) throws(VaultError) in
            var offset = 0
            func take(_ count: Int) throws(VaultError) -> ArraySlice<UInt8> {
                guard count >= 0, bytes.count - offset >= count else { throw fail("is cut short") }
                defer { offset += count }
                return ArraySlice(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count]))
            }
            guard Array(try take(4)) == Self.magic else { throw fail("is not a vault kit share") }
            let version = try take(1).first!
            guard version == Self.version else { throw .unsupportedVersion(what: "the recovery kit", version: version, supported: Self.version) }
            let lengthBytes = Array(try take(2))
            let prefixLength = Int(lengthBytes[0]) << 8 | Int(lengthBytes[1])
            guard prefixLength <= 9 + BundleHeader.maximumLength + 64 else { throw fail("has a header too long") }
            let prefix = Array(try take(prefixLength))
            let keyAt = offset
            _ = try take(32)
            let pieceLength = Array(try take(4)).reduce(0) { $0 << 8 | Int($1) }
            guard pieceLength <= KitCodes.maximumPayload else { throw fail("has a piece too long for paper") }
            let piece = Array(try take(pieceLength))
            let nameLength = Int(try take(1).first!)
            guard nameLength <= Self.maximumName else { throw fail("has a name too long") }
            let name = Array(try take(nameLength))
            guard offset == bytes.count else { throw fail("is followed by other bytes") }
            return (prefix, keyAt, piece, name)
        }
        var offset = 0
        let header: BundleHeader
        do {
            (header, _) = try ShareBundle.parsePrefix { count in
                defer { offset += count }
                return Array(parsed.prefix[min(offset, parsed.prefix.count)..<min(parsed.prefix.count, offset + count)])
            }
        } catch let error as VaultError {
            throw error
        } catch {
            throw fail("has a header that does not parse")
        }
        guard offset == parsed.prefix.count else { throw fail("has bytes after its header") }
        guard UInt64(parsed.piece.count) == header.pieceLength else { throw fail("has a piece of the wrong length") }
        guard let name = String(validating: parsed.name, as: UTF8.self) else { throw fail("has a name that is not UTF-8") }
        self.header = header
        prefix = parsed.prefix
        keyShare = payload.slice(parsed.keyAt..<parsed.keyAt + 32)
        piece = parsed.piece
        holderName = name
    }

    /// Nil if the key share matches the dealer's proof key and the piece its commitment;
    /// otherwise what is wrong.
    func problem() -> String? {
        let hasher = header.commitmentHasher()
        piece.withUnsafeBytes { hasher.update($0) }
        guard Sodium.equal(hasher.finish(), header.commitments[header.holderIndex - 1]) else {
            return "its piece does not match the dealer's commitment"
        }
        guard header.keyShareMatches(index: header.holderIndex, keyShare: keyShare) else {
            return "its key share does not match the dealer's proof key"
        }
        return nil
    }
}
