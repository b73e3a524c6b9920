import CSodium

/// What kind of secret a bundle holds. The type is public (in the signed header) and
/// repeated inside the encryption, where it is checked against the header.
public enum SecretType: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// Text.
    case note = 1
    /// A file: its name and content, of any size.
    case file = 2
    /// A password, with an optional username and URL.
    case password = 3
    /// A contact: name, phones, emails, address; the content is a note.
    case contact = 4
    /// 32 random bytes: a shared encryption key.
    case key = 5

    public var description: String {
        switch self {
        case .note: "note"
        case .file: "file"
        case .password: "password"
        case .contact: "contact"
        case .key: "key"
        }
    }

    /// The type named `name` (`note`, `file`, …).
    public init?(name: String) {
        guard let found = Self.allCases.first(where: { $0.description == name }) else { return nil }
        self = found
    }
}

/// The encrypted fields of a secret besides its content.
public struct SecretMetadata: Equatable, Sendable {
    /// A file's name (type `file`).
    public var fileName: String?
    /// A password's username.
    public var username: String?
    /// A password's URL.
    public var url: String?
    /// A contact's name.
    public var contactName: String?
    /// A contact's phone numbers.
    public var phones: [String] = []
    /// A contact's email addresses.
    public var emails: [String] = []
    /// A contact's postal address.
    public var address: String?

    public init(fileName: String? = nil, username: String? = nil, url: String? = nil, contactName: String? = nil,
                phones: [String] = [], emails: [String] = [], address: String? = nil) {
        self.fileName = fileName
        self.username = username
        self.url = url
        self.contactName = contactName
        self.phones = phones
        self.emails = emails
        self.address = address
    }

    static let maximumFieldLength = 4096
    static let maximumFields = 64
    /// The encoded fields sit behind a 2-byte length (FORMAT.md §10): 64 fields of 4096 bytes
    /// would overflow it, so the total is bounded here rather than trapping in the writer.
    static let maximumEncodedLength = 65535

    private enum Tag: UInt8 {
        case fileName = 1, username, url, contactName, phone, email, address
    }

    private var fields: [(Tag, String)] {
        var out: [(Tag, String)] = []
        if let fileName { out.append((.fileName, fileName)) }
        if let username { out.append((.username, username)) }
        if let url { out.append((.url, url)) }
        if let contactName { out.append((.contactName, contactName)) }
        out += phones.map { (.phone, $0) }
        out += emails.map { (.email, $0) }
        if let address { out.append((.address, address)) }
        return out
    }

    /// Checks the bounds before anything is encrypted.
    func validate() throws(VaultError) {
        let fields = self.fields
        guard fields.count <= Self.maximumFields else {
            throw .invalidSecret("more than \(Self.maximumFields) fields")
        }
        for (_, value) in fields where value.utf8.count > Self.maximumFieldLength || value.isEmpty {
            throw .invalidSecret("a field is empty or longer than \(Self.maximumFieldLength) bytes")
        }
        let total = fields.reduce(0) { $0 + 3 + $1.1.utf8.count }
        guard total <= Self.maximumEncodedLength else {
            throw .invalidSecret("the fields take \(total) bytes, more than \(Self.maximumEncodedLength)")
        }
    }

    /// Tag (1) ‖ length (2) ‖ UTF-8 value, tags in ascending order.
    func encoded() -> [UInt8] {
        var writer = ByteWriter()
        for (tag, value) in fields {
            writer.u8(tag.rawValue)
            writer.string16(value)
        }
        return writer.bytes
    }

    static func parse(_ bytes: [UInt8]) throws(ByteReader.Failure) -> SecretMetadata {
        var reader = ByteReader(bytes)
        var metadata = SecretMetadata()
        var previous: UInt8 = 0, count = 0
        while reader.remaining > 0 {
            let raw = try reader.u8()
            guard let tag = Tag(rawValue: raw) else { throw .invalid("unknown field \(raw)") }
            // Ascending order, repeated only for phones and emails: one encoding per value.
            guard raw > previous || (raw == previous && (tag == .phone || tag == .email)) else {
                throw .invalid("fields out of order")
            }
            previous = raw
            count += 1
            let value = try reader.string16("value of field \(raw)")
            guard count <= maximumFields, !value.isEmpty, value.utf8.count <= maximumFieldLength else {
                throw .invalid("a field is out of bounds")
            }
            switch tag {
            case .fileName: metadata.fileName = value
            case .username: metadata.username = value
            case .url: metadata.url = value
            case .contactName: metadata.contactName = value
            case .phone: metadata.phones.append(value)
            case .email: metadata.emails.append(value)
            case .address: metadata.address = value
            }
        }
        return metadata
    }
}

/// The innermost plaintext: type (1) ‖ metadata length (2) ‖ metadata ‖ content.
/// Items (§13) use the same layout with their own type codes.
enum PayloadHeader {
    static func encode(type: UInt8, metadata: SecretMetadata) -> [UInt8] {
        let fields = metadata.encoded()
        var writer = ByteWriter()
        writer.u8(type)
        writer.u16(UInt16(fields.count))
        writer.raw(fields)
        return writer.bytes
    }
}

/// Parses the innermost plaintext as it streams in: the header first, then content.
final class PayloadParser {
    private var header: [UInt8] = []
    private var needed = 3
    private(set) var metadata: SecretMetadata?
    private let expectedType: UInt8
    private let content: (UnsafeRawBufferPointer) throws -> Void
    private let metadataReady: (SecretMetadata) throws -> Void

    init(expectedType: UInt8, metadataReady: @escaping (SecretMetadata) throws -> Void = { _ in },
         content: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        self.expectedType = expectedType
        self.metadataReady = metadataReady
        self.content = content
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while metadata == nil && offset < bytes.count {
            let take = min(needed - header.count, bytes.count - offset)
            header += bytes[offset..<offset + take]
            offset += take
            if header.count == 3 && needed == 3 {
                guard header[0] == expectedType else {
                    throw VaultError.corruptSecret("the encrypted type does not match the signed header")
                }
                needed = 3 + Int(header[1]) << 8 + Int(header[2])
            }
            if header.count == needed {
                // The raw fields (file name, username, contact details) are zeroed once parsed;
                // what remains is in the metadata the caller asked for.
                var fields = Array(header[3...])
                defer {
                    fields.withUnsafeMutableBytes { sodium_memzero($0.baseAddress, $0.count) }
                    header.withUnsafeMutableBytes { sodium_memzero($0.baseAddress, $0.count) }
                }
                do {
                    metadata = try SecretMetadata.parse(fields)
                } catch {
                    throw VaultError.corruptSecret("its metadata is malformed: \(VaultError.words(for: error))")
                }
                try metadataReady(metadata!)
            }
        }
        if offset < bytes.count { try content(UnsafeRawBufferPointer(rebasing: bytes[offset...])) }
    }

    func finish() throws {
        guard metadata != nil else { throw VaultError.corruptSecret("its header is incomplete") }
    }
}
