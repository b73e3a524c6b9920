import Foundation

/// Where a request's results go: what the URL allowlist is keyed on.
///
/// `x-source` is whatever the caller claims, so it cannot decide anything: a web page can
/// name itself after an allowed program. The destination is what matters for a secret,
/// because the results (a plaintext, for `decrypt`) go there. It is the callback's origin:
/// `https://host[:port]` for a network scheme, `scheme:` for an application's own scheme
/// (the desktop hands it to that one application), or `-` for standard output, which goes
/// back to the program that ran `vault url` itself.
public struct CallbackDestination: Equatable, Hashable, Sendable, CustomStringConvertible {
    /// The canonical text: `https://example.com`, `myapp:`, or `-`.
    public let description: String
    /// Whether results leave this machine's applications for a server (http, https, …).
    public let isNetwork: Bool

    /// Schemes whose callbacks reach a server rather than a local application.
    static let networkSchemes: Set<String> = ["http", "https", "ws", "wss", "ftp"]

    /// Standard output: the results go back to the program that ran `vault url`.
    public static let standardOutput = CallbackDestination(description: "-", isNetwork: false)

    private init(description: String, isNetwork: Bool) {
        self.description = description
        self.isNetwork = isNetwork
    }

    /// The destination of a callback URL (`x-success`), or nil when it has no usable origin.
    public init?(callback: String) {
        guard let colon = callback.firstIndex(of: ":") else { return nil }
        let scheme = callback[..<colon].lowercased()
        // RFC 3986 §3.1: a letter, then letters, digits, + - .
        guard let first = scheme.unicodeScalars.first, first.isASCIILetter,
              scheme.unicodeScalars.allSatisfy({ $0.isASCIILetter || ("0"..."9").contains($0) || "+-.".unicodeScalars.contains($0) })
        else { return nil }
        guard Self.networkSchemes.contains(scheme) else {
            self.init(description: scheme + ":", isNetwork: false)
            return
        }
        guard let components = URLComponents(string: callback), let host = components.host?.lowercased(), !host.isEmpty,
              host.unicodeScalars.allSatisfy({ $0.isASCII && $0.properties.generalCategory != .control })
        else { return nil }
        let port = components.port.map { ":\($0)" } ?? ""
        self.init(description: "\(scheme)://\(host)\(port)", isNetwork: true)
    }

    /// A destination as the user names it for the allowlist: `-`, `myapp`, `myapp:`, or a
    /// URL whose origin is taken (`https://example.com/path` allows `https://example.com`).
    public init(allowing text: String) throws(VaultError) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed == "-" {
            self = .standardOutput
            return
        }
        let candidate = trimmed.contains(":") ? trimmed : trimmed + ":"
        guard trimmed.utf8.count <= 256, let destination = CallbackDestination(callback: candidate) else {
            throw .invalidDestination(text)
        }
        self = destination
    }
}

extension Unicode.Scalar {
    fileprivate var isASCIILetter: Bool { ("a"..."z").contains(self) || ("A"..."Z").contains(self) }
}
