import Foundation

/// A human name for an identity or a peer: `alice`, `bob@laptop`, `Ana's phone`.
///
/// Labels name peers on the command line (`--to a,b`, `--peer a=host:port`), become file
/// names (`a.vshare`) and travel in QR codes, so the alphabet is an allowlist: Unicode
/// letters and digits, space, and `. _ - @ + '`. 1 to 64 characters and at most 255
/// UTF-8 bytes, no leading or trailing space, not starting with `.` or `-`. Two labels that differ only in case are
/// the same label.
public struct Label: Hashable, Sendable, CustomStringConvertible {
    /// The label as the user wrote it (NFC-normalised).
    public let value: String

    /// The most characters a label may have.
    public static let maximumLength = 64
    /// The most UTF-8 bytes a label may have: a bundle header writes a label behind a 1-byte
    /// length (FORMAT.md §9), so 64 four-byte characters (256 bytes) must be refused here.
    public static let maximumBytes = 255

    /// Validates `text` as a label.
    public init(_ text: String) throws(VaultError) {
        let normalized = text.precomposedStringWithCanonicalMapping
        let scalars = normalized.unicodeScalars
        guard !scalars.isEmpty else { throw .invalidLabel(text, reason: "it is empty") }
        guard scalars.count <= Self.maximumLength else {
            throw .invalidLabel(text, reason: "it is longer than \(Self.maximumLength) characters")
        }
        guard normalized.utf8.count <= Self.maximumBytes else {
            throw .invalidLabel(text, reason: "it is longer than \(Self.maximumBytes) bytes in UTF-8")
        }
        let punctuation: Set<Unicode.Scalar> = [" ", ".", "_", "-", "@", "+", "'"]
        for scalar in scalars {
            let allowed = scalar.properties.isAlphabetic || scalar.properties.numericType != nil
                || punctuation.contains(scalar)
            guard allowed, !scalar.properties.isWhitespace || scalar == " " else {
                throw .invalidLabel(text, reason: "it contains \(Self.describe(scalar))")
            }
        }
        guard scalars.first != " ", scalars.last != " " else {
            throw .invalidLabel(text, reason: "it starts or ends with a space")
        }
        guard scalars.first != ".", scalars.first != "-" else {
            throw .invalidLabel(text, reason: "it starts with '.' or '-'")
        }
        value = normalized
    }

    /// A label as it is in a signed format (a bundle header, a group record). Labels the
    /// user types are normalised, but a signed record is hashed as received, so a label not
    /// already in NFC is refused here rather than re-encoded into bytes its signer never
    /// signed.
    init(signed r: inout ByteReader) throws {
        let bytes = try r.raw(Int(try r.u8()))
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ByteReader.Failure.invalid("a label is not UTF-8")
        }
        guard Array(text.precomposedStringWithCanonicalMapping.utf8) == bytes else {
            throw ByteReader.Failure.invalid("a label is not in Unicode NFC")
        }
        try self.init(text)
    }

    /// The form under which labels are compared.
    var key: String { value.lowercased() }

    public var description: String { value }

    /// Whether `typed` names the label `label` as the keystore compares labels (case aside).
    public static func sameName(_ typed: String, _ label: String) -> Bool {
        ((try? Label(typed))?.key ?? typed) == ((try? Label(label))?.key ?? label)
    }

    /// A valid label made from arbitrary text (such as `user@hostname`) by replacing what
    /// the alphabet does not allow.
    static func sanitized(_ text: String) -> Label {
        var scalars = String.UnicodeScalarView()
        var bytes = 0
        for scalar in text.precomposedStringWithCanonicalMapping.unicodeScalars.prefix(maximumLength) {
            let ok = scalar.properties.isAlphabetic || scalar.properties.numericType != nil
                || "._-@+'".unicodeScalars.contains(scalar)
            let kept: Unicode.Scalar = ok ? scalar : "-"
            bytes += UTF8.width(kept)
            if bytes > maximumBytes { break }
            scalars.append(kept)
        }
        var text = String(scalars)
        while text.hasPrefix(".") || text.hasPrefix("-") { text.removeFirst() }
        return (try? Label(text)) ?? (try! Label("vault"))
    }

    /// `user@hostname` for this process, made into a valid label.
    public static func machineDefault() -> Label {
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, host.count - 1)
        let hostname = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            .split(separator: ".").first.map(String.init) ?? "localhost"
        var user = ProcessInfo.processInfo.environment["USER"] ?? ""
        if user.isEmpty, let entry = getpwuid(getuid()), let name = entry.pointee.pw_name {
            user = String(decoding: UnsafeRawBufferPointer(start: name, count: strlen(name)), as: UTF8.self)
        }
        return sanitized("\(user.isEmpty ? "user" : user)@\(hostname)")
    }

    private static func describe(_ scalar: Unicode.Scalar) -> String {
        if scalar.properties.generalCategory == .control || scalar.properties.isWhitespace {
            return "the character U+\(String(scalar.value, radix: 16, uppercase: true))"
        }
        return "the character '\(scalar)'"
    }
}
