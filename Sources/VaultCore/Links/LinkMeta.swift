import Foundation

/// What a link says about its content, encrypted inside it (Docs/LINKS.md, "Blob"): a
/// note, or a file and its name. Nothing about the content is in the clear.
public struct LinkMeta: Equatable, Sendable {
    public enum Kind: String, Sendable { case note, file }

    public let kind: Kind
    /// A file's name as the sender gave it (the last path component); shown and used by
    /// the receiver only after it is made safe.
    public let name: String?

    /// The longest encoded form accepted.
    public static let maximumLength = 4096
    /// The longest name, in UTF-8 bytes (a Linux file name's limit).
    public static let maximumNameLength = 255

    public init(kind: Kind, name: String?) throws(VaultError) {
        if let name, name.utf8.count > Self.maximumNameLength || name.isEmpty {
            throw .invalidSecret("a link's file name is 1 to \(Self.maximumNameLength) bytes")
        }
        if kind == .note && name != nil { throw .invalidSecret("a note has no file name") }
        self.kind = kind
        self.name = name
    }

    /// The JSON the page reads: `{"type":"note"}` or `{"name":"…","type":"file"}`.
    public var encoded: [UInt8] {
        var object: [String: String] = ["type": kind.rawValue]
        if let name { object["name"] = name }
        return [UInt8]((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data())
    }

    /// Reads the JSON; keys other than `type` and `name` are ignored, for later versions.
    public init(parsing bytes: [UInt8]) throws(VaultError) {
        guard bytes.count >= 2, bytes.count <= Self.maximumLength,
              let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
              let kind = (object["type"] as? String).flatMap(Kind.init(rawValue:)) else {
            throw .damaged(what: "the link", detail: "its description is not valid")
        }
        let name = object["name"] as? String
        guard object["name"] == nil || name != nil else { throw .damaged(what: "the link", detail: "its file name is not text") }
        do {
            try self.init(kind: kind, name: kind == .file ? name : nil)
        } catch {
            throw .damaged(what: "the link", detail: "its description is not valid")
        }
    }
}
