import Foundation

/// What kind of item a shared key encrypts. The codes match ``SecretType`` where the kinds
/// are the same; 5 (a key) is not an item.
public enum ItemType: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case note = 1, file = 2, password = 3, contact = 4, photo = 6

    public var description: String {
        switch self {
        case .note: "note"
        case .file: "file"
        case .password: "password"
        case .contact: "contact"
        case .photo: "photo"
        }
    }

    /// The type named `name` (`note`, `file`, …).
    public init?(name: String) {
        guard let found = Self.allCases.first(where: { $0.description == name }) else { return nil }
        self = found
    }

    /// Whether the content is text, shown on a terminal as it is.
    public var isText: Bool { self == .note || self == .password || self == .contact }
}

/// The public header of an item: which key opens it and what may be shown without opening
/// it. Docs/FORMAT.md §13 gives the bytes. The header is bound to the content by the item
/// key, which is derived from its hash: an altered header opens nothing.
public struct ItemHeader: Equatable, Sendable {
    /// The item's random id.
    public let itemID: [UInt8]
    /// The id of the shared key that encrypts it.
    public let keyID: [UInt8]
    /// Unix seconds when it was first encrypted.
    public let createdAt: UInt64
    /// The kind of item.
    public let type: ItemType
    /// Whether a password layer sits inside (public, so a reader knows to ask).
    public let passwordProtected: Bool
    /// A public title (may be empty).
    public let title: String
    /// A public description (may be empty).
    public let description: String

    static let maximumTitle = 256
    static let maximumDescription = 1024

    /// A new item under `keyID`, with a fresh random id.
    public init(keyID: [UInt8], type: ItemType, passwordProtected: Bool = false, title: String, description: String,
                random: some RandomSource = SecureRandom()) throws(VaultError) {
        guard title.utf8.count <= Self.maximumTitle else { throw .invalidSecret("the title is longer than \(Self.maximumTitle) bytes") }
        guard description.utf8.count <= Self.maximumDescription else {
            throw .invalidSecret("the description is longer than \(Self.maximumDescription) bytes")
        }
        self.init(itemID: random.bytes(16), keyID: keyID, createdAt: VaultClock.seconds(), type: type,
                  passwordProtected: passwordProtected, title: title, description: description)
    }

    init(itemID: [UInt8], keyID: [UInt8], createdAt: UInt64, type: ItemType, passwordProtected: Bool, title: String,
         description: String) {
        self.itemID = itemID
        self.keyID = keyID
        self.createdAt = createdAt
        self.type = type
        self.passwordProtected = passwordProtected
        self.title = title
        self.description = description
    }

    /// The same item's metadata under another key, with a new id (`item copy`).
    public func copy(to keyID: [UInt8], random: some RandomSource = SecureRandom()) -> ItemHeader {
        ItemHeader(itemID: random.bytes(16), keyID: keyID, createdAt: createdAt, type: type, passwordProtected: passwordProtected,
                   title: title, description: description)
    }

    /// The same item (id, key, type, creation time) with a new title, description or
    /// password layer (`item edit`).
    public func edited(title: String? = nil, description: String? = nil, passwordProtected: Bool? = nil) throws(VaultError) -> ItemHeader {
        let title = title ?? self.title, description = description ?? self.description
        guard title.utf8.count <= Self.maximumTitle else { throw .invalidSecret("the title is longer than \(Self.maximumTitle) bytes") }
        guard description.utf8.count <= Self.maximumDescription else {
            throw .invalidSecret("the description is longer than \(Self.maximumDescription) bytes")
        }
        return ItemHeader(itemID: itemID, keyID: keyID, createdAt: createdAt, type: type,
                          passwordProtected: passwordProtected ?? self.passwordProtected, title: title, description: description)
    }

    /// The id as 32 hex digits.
    public var itemIDHex: String { itemID.hex }

    /// item id (16) ‖ key id (16) ‖ created (8) ‖ type (1) ‖ password layer (1) ‖ title (2+)
    /// ‖ description (2+).
    func encoded() -> [UInt8] {
        var w = ByteWriter()
        w.raw(itemID)
        w.raw(keyID)
        w.u64(createdAt)
        w.u8(type.rawValue)
        w.u8(passwordProtected ? 1 : 0)
        w.string16(title)
        w.string16(description)
        return w.bytes
    }

    init(parsing bytes: [UInt8]) throws(VaultError) {
        func fail(_ detail: String) -> VaultError { .malformed(what: "the item", detail: detail) }
        var r = ByteReader(bytes)
        do {
            itemID = try r.raw(16)
            keyID = try r.raw(16)
            createdAt = try r.u64()
            guard let type = ItemType(rawValue: try r.u8()) else { throw fail("unknown item type") }
            self.type = type
            switch try r.u8() {
            case 0: passwordProtected = false
            case 1: passwordProtected = true
            default: throw fail("bad password flag")
            }
            title = try r.string16("title")
            description = try r.string16("description")
            guard title.utf8.count <= Self.maximumTitle, description.utf8.count <= Self.maximumDescription else {
                throw fail("title or description too long")
            }
            try r.end()
        } catch let error as VaultError {
            throw error
        } catch {
            throw fail(VaultError.words(for: error))
        }
    }

    /// What the item key is derived from: BLAKE2b-256 keyed "vault/v1/item-header".
    var hash: [UInt8] { Sodium.blake2b(key: "vault/v1/item-header", encoded()) }
}

/// The export framing around a header and its stream (§13):
/// `"VLTI" ‖ version 0x01 ‖ header length (2) ‖ header ‖ stream length (8) ‖ stream`.
enum ItemExport {
    static let magic = Array("VLTI".utf8)
    static let version: UInt8 = 1
    static let maximumHeader = 16 + 16 + 8 + 1 + 1 + 2 + ItemHeader.maximumTitle + 2 + ItemHeader.maximumDescription

    static func prefix(_ header: ItemHeader, streamLength: UInt64) -> [UInt8] {
        let encoded = header.encoded()
        var w = ByteWriter()
        w.raw(magic)
        w.u8(version)
        w.u16(UInt16(encoded.count))
        w.raw(encoded)
        w.u64(streamLength)
        return w.bytes
    }

    /// Reads the prefix from `read(count)`, which returns fewer bytes only at the end.
    static func parsePrefix(_ read: (Int) throws -> [UInt8]) throws -> (ItemHeader, streamLength: UInt64) {
        func fail(_ detail: String) -> VaultError { .malformed(what: "the item", detail: detail) }
        let start = try read(7)
        guard !start.isEmpty else { throw fail("it is empty") }
        guard start.starts(with: magic.prefix(start.count)) && (start.count < 4 || Array(start[0..<4]) == magic) else {
            throw fail("not a vault item")
        }
        guard start.count == 7 else { throw VaultError.truncated(what: "the item") }
        guard start[4] == version else { throw fail("unknown version \(start[4]); upgrade vault") }
        let length = Int(start[5]) << 8 | Int(start[6])
        guard length <= maximumHeader else { throw fail("header too long") }
        let body = try read(length + 8)
        guard body.count == length + 8 else { throw VaultError.truncated(what: "the item") }
        let header = try ItemHeader(parsing: Array(body[0..<length]))
        let streamLength = body[length...].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard streamLength <= Limits.maximumCiphertext, SecretStream.plaintextLength(sealed: streamLength) != nil else {
            throw fail("impossible stream length")
        }
        return (header, streamLength)
    }
}
