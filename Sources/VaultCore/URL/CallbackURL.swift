import Foundation

/// A `vault://x-callback-url/ACTION?…` request (x-callback-url 1.0), parsed strictly.
/// Docs/URL.md gives the rules and the actions' parameters.
///
/// - Only the scheme `vault` (any case) and the host `x-callback-url`; the path is one
///   action name.
/// - The query is `name=value` pairs joined by `&`. Names and values are percent-decoded
///   once; a `%` not followed by two hex digits, or bytes that are not UTF-8, are errors.
///   `+` is a literal plus, never a space (RFC 3986; space is `%20`).
/// - A name given twice is an error, so a request has one meaning.
/// - The URL is at most ``maximumLength`` bytes.
public struct CallbackRequest: Sendable {
    /// The action named by the path (any string; the caller checks it is known).
    public let action: String
    /// The parameters in their order, decoded.
    public let parameters: [(name: String, value: String)]

    /// The longest request accepted: room for 64 MiB of data in base64, percent-encoded.
    public static let maximumLength = 192 << 20

    /// Why a URL is not a request at all (no callback can be trusted from it).
    public enum Failure: UserFacingError, Equatable {
        case tooLong
        case notVault(String)
        case badPercentEncoding(String)
        case duplicate(String)
        case malformed(String)

        public var description: String {
            switch self {
            case .tooLong: "the URL is longer than \(CallbackRequest.maximumLength >> 20) MiB"
            case .notVault(let detail): "not a vault://x-callback-url/ request: \(detail)"
            case .badPercentEncoding(let name): "bad percent-encoding in \(name)"
            case .duplicate(let name): "the parameter '\(name)' is given twice"
            case .malformed(let detail): "malformed request: \(detail)"
            }
        }
    }

    public init(parsing text: String) throws(Failure) {
        guard text.utf8.count <= Self.maximumLength else { throw .tooLong }
        guard let colon = text.firstIndex(of: ":") else { throw .notVault("no scheme") }
        guard text[..<colon].lowercased() == "vault" else { throw .notVault("the scheme is not vault") }
        let rest = text[text.index(after: colon)...]
        let prefix = "//x-callback-url/"
        guard rest.lowercased().hasPrefix(prefix) else { throw .notVault("the host is not x-callback-url") }
        let afterHost = rest.dropFirst(prefix.count)
        guard !afterHost.contains("#") else { throw .malformed("a request has no fragment") }
        let path: Substring, query: Substring
        if let question = afterHost.firstIndex(of: "?") {
            path = afterHost[..<question]
            query = afterHost[afterHost.index(after: question)...]
        } else {
            path = afterHost
            query = ""
        }
        guard !path.isEmpty, path.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
            throw .malformed("the action must be one name")
        }
        action = String(path)
        var parameters: [(name: String, value: String)] = []
        var seen = Set<String>()
        if !query.isEmpty {
            for pair in query.split(separator: "&", omittingEmptySubsequences: false) {
                guard !pair.isEmpty else { throw .malformed("an empty parameter (&&)") }
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2 else { throw .malformed("a parameter without =") }
                let name = try Self.decode(parts[0], what: "a parameter name")
                guard !name.isEmpty else { throw .malformed("a parameter without a name") }
                let value = try Self.decode(parts[1], what: "'\(name)'")
                guard seen.insert(name).inserted else { throw .duplicate(name) }
                parameters.append((name, value))
            }
        }
        self.parameters = parameters
    }

    /// The value of `name`, if given.
    public subscript(_ name: String) -> String? { parameters.first { $0.name == name }?.value }

    /// Percent-decodes strictly; `+` stays `+`.
    static func decode(_ text: Substring, what: String) throws(Failure) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                throw .badPercentEncoding(what)
            }
            bytes.append(high << 4 | low)
        }
        guard let decoded = String(validating: bytes, as: UTF8.self) else { throw .badPercentEncoding(what) }
        return decoded
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// Builds callback URLs: the caller's URL as it was given, with result parameters appended
/// after any query it already has (and before a fragment), each name and value
/// percent-encoded so that only RFC 3986's unreserved characters stay literal.
public enum CallbackURL {
    /// `base` with `parameters` appended.
    public static func appending(_ parameters: [(String, String)], to base: String) -> String {
        guard !parameters.isEmpty else { return base }
        var url = base, fragment = ""
        if let hash = base.firstIndex(of: "#") {
            url = String(base[..<hash])
            fragment = String(base[hash...])
        }
        let query = parameters.map { "\(encode($0.0))=\(encode($0.1))" }.joined(separator: "&")
        let separator = url.contains("?") ? (url.hasSuffix("?") || url.hasSuffix("&") ? "" : "&") : "?"
        return url + separator + query + fragment
    }

    /// Percent-encodes everything but `A-Z a-z 0-9 - . _ ~`.
    public static func encode(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += escapes[Int(byte)]
            }
        }
        return out
    }

    private static let escapes = (0..<256).map { String(format: "%%%02X", $0) }
}
