import Foundation

/// One signed change to an item under a synced shared key (Docs/FORMAT.md §18):
///
///     "VLTC" ‖ version 0x01 ‖ body length (4) ‖ body ‖ signature (64)   — the record
///     ‖ content                                                          — a put's item export
///
///     body = key id (16) ‖ item id (16) ‖ counter (8) ‖ author card (65) ‖ operation (1)
///          ‖ created (8) ‖ superseded count (1) ‖ per superseded: counter (8) ‖ author key (32)
///          ‖ content length (8) ‖ content SHA-256 (32)
///
/// A put carries the whole item export (§13), already encrypted under the shared key, so a
/// holder checks a change's origin without the key and its content once the key is
/// unlocked. A delete carries no content; it stays as a tombstone so that an older put
/// that arrives later does not bring the item back. `supersedes` names the versions the
/// author saw as current when it made the change: that, not arrival order, is what makes a
/// later change replace an earlier one, and what tells a concurrent edit (kept as a
/// conflict copy) from a sequential one.
public struct ItemChange: Equatable, Sendable {
    /// What a change does.
    public enum Operation: UInt8, Sendable {
        /// The item now has this content, title and description.
        case put = 1
        /// The item is deleted.
        case delete = 2
    }

    /// The shared key whose items this changes.
    public let keyID: [UInt8]
    /// The item.
    public let itemID: [UInt8]
    /// The change's version; its author is `author`'s signing key.
    public let version: ItemVersion
    /// The author's card (the record is signed with its Ed25519 key).
    public let author: KeyCard
    /// Put or delete.
    public let operation: Operation
    /// Unix seconds when the author made it (shown, never used to order).
    public let createdAt: UInt64
    /// The versions this change replaces, as its author saw them.
    public let supersedes: [ItemVersion]
    /// Bytes of the content (a put's item export), 0 for a delete.
    public let contentLength: UInt64
    /// SHA-256 of the content; zeros for a delete.
    public let contentHash: [UInt8]

    /// The highest counter a change may carry: 2^48. Far past what people edit, and far
    /// below where a counter one above it could overflow, so that a holder who signs a huge
    /// counter can use the key up (later changes are refused in words) but not crash it.
    public static let maximumCounter: UInt64 = 1 << 48
    /// At most this many versions superseded by one change (and so at most this many
    /// conflicting copies of one item are resolved at once).
    public static let maximumSuperseded = 16
    static let magic = Array("VLTC".utf8)
    static let formatVersion: UInt8 = 1
    static let signatureDomain = Array("vault/v1/item-change".utf8)
    static let maximumBody = 16 + 16 + 8 + KeyCard.encodedLength + 1 + 8 + 1 + maximumSuperseded * 40 + 8 + 32
    /// The record's length when its body is at its longest.
    public static let maximumRecordLength = SignedFrame.startLength + maximumBody + 64

    /// A change, before it is signed.
    public init(keyID: [UInt8], itemID: [UInt8], counter: UInt64, author: KeyCard, operation: Operation, createdAt: UInt64,
                supersedes: [ItemVersion], contentLength: UInt64, contentHash: [UInt8]) {
        precondition(keyID.count == 16 && itemID.count == 16 && contentHash.count == 32 && supersedes.count <= Self.maximumSuperseded)
        self.keyID = keyID
        self.itemID = itemID
        self.version = ItemVersion(counter: counter, author: author.signingKey)
        self.author = author
        self.operation = operation
        self.createdAt = createdAt
        self.supersedes = supersedes.sorted()
        self.contentLength = contentLength
        self.contentHash = contentHash
    }

    func body() -> [UInt8] {
        var w = ByteWriter()
        w.raw(keyID)
        w.raw(itemID)
        w.u64(version.counter)
        w.raw(author.encoded)
        w.u8(operation.rawValue)
        w.u64(createdAt)
        w.u8(UInt8(supersedes.count))
        for old in supersedes {
            w.u64(old.counter)
            w.raw(old.author)
        }
        w.u64(contentLength)
        w.raw(contentHash)
        return w.bytes
    }

    /// The signed record (without its content).
    public func signed(by author: Identity) -> [UInt8] {
        precondition(author.card == self.author)
        return SignedFrame.make(magic: Self.magic, version: Self.formatVersion, body: body(), domain: Self.signatureDomain, signer: author)
    }

    /// Reads and verifies a signed record: its framing, its fields and its author's
    /// signature. What it says about the item is checked by the keystore that applies it.
    public init(record bytes: [UInt8]) throws(VaultError) {
        try self.init(record: bytes, verify: true)
    }

    /// A record read back from the keystore, where it was stored only after its signature
    /// verified: it is parsed again, not verified again (an item's history is read at
    /// every change to it).
    init(stored bytes: [UInt8]) throws(VaultError) {
        try self.init(record: bytes, verify: false)
    }

    private init(record bytes: [UInt8], verify: Bool) throws(VaultError) {
        func fail(_ detail: String) -> VaultError { .malformed(what: "the item change", detail: detail) }
        guard bytes.count >= SignedFrame.startLength + 64, Array(bytes[0..<4]) == Self.magic else { throw fail("not a vault item change") }
        guard bytes[4] == Self.formatVersion else {
            throw .unsupportedVersion(what: "the item change", version: bytes[4], supported: Self.formatVersion)
        }
        let length = SignedFrame.bodyLength(bytes)
        guard length <= Self.maximumBody, bytes.count == SignedFrame.startLength + length + 64 else { throw fail("its length is wrong") }
        let body = Array(bytes[SignedFrame.startLength..<(SignedFrame.startLength + length)])
        var r = ByteReader(body)
        let counter: UInt64
        do {
            keyID = try r.raw(16)
            itemID = try r.raw(16)
            counter = try r.u64()
            author = try KeyCard(encoded: try r.raw(KeyCard.encodedLength))
            version = ItemVersion(counter: counter, author: author.signingKey)
            guard let operation = Operation(rawValue: try r.u8()) else { throw fail("unknown operation") }
            self.operation = operation
            createdAt = try r.u64()
            let count = Int(try r.u8())
            guard count <= Self.maximumSuperseded else { throw fail("it supersedes more than \(Self.maximumSuperseded) versions") }
            supersedes = try (0..<count).map { _ in ItemVersion(counter: try r.u64(), author: try r.raw(32)) }
            contentLength = try r.u64()
            contentHash = try r.raw(32)
            try r.end()
        } catch let error as VaultError {
            if case .invalidCard = error { throw fail("its author's card is invalid") }
            throw error
        } catch {
            throw fail(VaultError.words(for: error))
        }
        // Counters are kept as signed 64-bit integers, and a change never supersedes itself
        // or a later version (its author counted past what it saw).
        guard counter > 0, counter <= Self.maximumCounter else { throw fail("its counter is out of range") }
        guard supersedes == supersedes.sorted(), Set(supersedes).count == supersedes.count,
              supersedes.allSatisfy({ $0.counter < counter }) else { throw fail("it supersedes a version it cannot have seen") }
        switch operation {
        case .put:
            guard contentLength > 0, contentLength <= Limits.maximumCiphertext + UInt64(ItemExport.maximumHeader) + 64 else {
                throw fail("its content length is impossible")
            }
        case .delete:
            guard contentLength == 0, contentHash.allSatisfy({ $0 == 0 }) else { throw fail("a delete carries content") }
        }
        guard body == self.body() else { throw fail("it is not canonically encoded") }
        guard !verify || author.verify(signature: Array(bytes.suffix(64)), of: Self.signatureDomain + body) else {
            throw .badSignature(what: "the item change")
        }
    }

    /// The superseded versions of a record stored by the keystore (checked when it was
    /// stored), read at their place in the body without parsing the rest; nil when the
    /// record is too short for them.
    static func storedSupersedes(_ record: [UInt8]) -> [ItemVersion]? {
        // key id, item id, counter, author card, operation, created
        let countAt = SignedFrame.startLength + 16 + 16 + 8 + KeyCard.encodedLength + 1 + 8
        guard record.count > countAt else { return nil }
        let count = Int(record[countAt])
        guard count <= maximumSuperseded, record.count >= countAt + 1 + 40 * count else { return nil }
        return (0..<count).map { i in
            let at = countAt + 1 + 40 * i
            let counter = record[at..<(at + 8)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            return ItemVersion(counter: counter, author: Array(record[(at + 8)..<(at + 40)]))
        }
    }

    /// The length of the record whose first ``SignedFrame/startLength`` bytes are `start`,
    /// or nil when they cannot start one.
    public static func recordLength(start: [UInt8]) -> Int? {
        guard start.count >= SignedFrame.startLength, Array(start[0..<4]) == magic, start[4] == formatVersion else { return nil }
        let length = SignedFrame.bodyLength(start)
        guard length <= maximumBody else { return nil }
        return SignedFrame.startLength + length + 64
    }
}
