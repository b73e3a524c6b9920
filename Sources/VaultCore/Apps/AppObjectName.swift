/// Where an application's object lives among a shared key's items (Docs/FORMAT.md §22): the
/// application's id, the object's type and its id within that type.
///
/// An object is an item of the key whose id is derived from these names, so every holder
/// who writes "shopping-list/item/milk" writes the same item, and two holders who write it
/// at once make two versions of one item, ordered by the item sync's versions (a conflict
/// copy kept beside the winner), not two unrelated items. Its title says the names, so
/// `vault item list` shows whose object an item is; the derived id is what makes it one:
/// a note someone titled "shopping-list/item/milk" by hand has a random id and is not.
public struct AppObjectName: Hashable, Sendable, CustomStringConvertible {
    /// The application's id: 1 to 64 of `a-z 0-9 . _ -`, starting with a letter or digit.
    public let app: String
    /// The object's type: 1 to 48 of `A-Z a-z 0-9 . _ -`, starting with a letter or digit.
    public let type: String
    /// The object's id within its type: 1 to 128 bytes of UTF-8, no control characters,
    /// compared byte for byte (not normalized).
    public let id: String

    static let maximumApp = 64, maximumType = 48, maximumID = 128

    /// A name, checked.
    public init(app: String, type: String, id: String) throws(VaultError) {
        try Self.check(app, what: "app id", maximum: Self.maximumApp, allowed: Self.isAppCharacter)
        try Self.check(type, what: "object type", maximum: Self.maximumType, allowed: Self.isTypeCharacter)
        try Self.checkID(id)
        self.app = app
        self.type = type
        self.id = id
    }

    /// Checks an application id alone (`vault app list APP`).
    public static func checkApp(_ app: String) throws(VaultError) {
        try check(app, what: "app id", maximum: maximumApp, allowed: isAppCharacter)
    }

    /// Checks an object type alone.
    public static func checkType(_ type: String) throws(VaultError) {
        try check(type, what: "object type", maximum: maximumType, allowed: isTypeCharacter)
    }

    /// The item id of this object under key `keyID`:
    /// BLAKE2b-128(key = "vault/v1/app-object", key id ‖ len ‖ app ‖ len ‖ type ‖ id).
    /// The key id is in it so that one application's objects on two keys are two items
    /// (an item id belongs to one key).
    public func itemID(keyID: [UInt8]) -> [UInt8] {
        precondition(keyID.count == 16)
        let app = Array(self.app.utf8), type = Array(self.type.utf8)
        return Sodium.blake2b(outputLength: 16, key: "vault/v1/app-object", keyID, [UInt8(app.count)], app, [UInt8(type.count)], type,
                              Array(id.utf8))
    }

    /// The item title that names it: `APP/TYPE/ID`.
    public var title: String { "\(app)/\(type)/\(id)" }

    public var description: String { title }

    /// The object an item is, if it is one: its title names an object whose derived id is
    /// the item's.
    public init?(_ header: ItemHeader) {
        let parts = header.title.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let name = try? AppObjectName(app: String(parts[0]), type: String(parts[1]), id: String(parts[2])),
              name.itemID(keyID: header.keyID) == header.itemID else { return nil }
        self = name
    }

    private static func isAppCharacter(_ c: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(c) || ("0"..."9").contains(c) || c == "." || c == "_" || c == "-"
    }

    private static func isTypeCharacter(_ c: Unicode.Scalar) -> Bool {
        isAppCharacter(c) || ("A"..."Z").contains(c)
    }

    private static func check(_ text: String, what: String, maximum: Int, allowed: (Unicode.Scalar) -> Bool) throws(VaultError) {
        guard let first = text.unicodeScalars.first else { throw .invalidAppObject("the \(what) is empty") }
        guard text.unicodeScalars.count <= maximum else { throw .invalidAppObject("the \(what) is longer than \(maximum) characters") }
        // A name starting with '.' or '-' reads as a path or an option.
        guard text.unicodeScalars.allSatisfy(allowed), first != ".", first != "-", first != "_" else {
            throw .invalidAppObject("the \(what) \(quoted(text)) may hold only \(what == "app id" ? "a-z" : "letters,") digits, '.', '_' and '-', and starts with a letter or digit")
        }
    }

    private static func checkID(_ id: String) throws(VaultError) {
        guard !id.isEmpty else { throw .invalidAppObject("the object id is empty") }
        guard id.utf8.count <= maximumID else { throw .invalidAppObject("the object id is longer than \(maximumID) bytes") }
        // Ids are printed (vault item list, watch lines): no control characters.
        guard !id.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) else {
            throw .invalidAppObject("the object id holds a control character")
        }
    }
}
