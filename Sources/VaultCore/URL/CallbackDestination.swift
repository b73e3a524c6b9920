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

    /// Schemes whose callbacks reach a server rather than a local application: the web, and
    /// the other common schemes whose desktop handlers fetch from the host they name.
    static let networkSchemes: Set<String> = [
        "http", "https", "ws", "wss", "ftp", "ftps", "sftp", "webcal", "webcals", "feed", "dav", "davs", "webdav", "webdavs",
        "smb", "nfs", "rtsp", "rtsps", "rtmp", "irc", "ircs", "git", "ssh", "telnet", "gopher", "ldap", "ldaps", "sip", "sips",
        "xmpp", "mailto", "news", "nntp", "snews", "mms", "spotify",
    ]
    /// Schemes that run or read something rather than hand results to a program: never a
    /// destination.
    static let refusedSchemes: Set<String> = ["javascript", "vbscript", "data", "file", "about", "blob", "view-source"]

    /// Standard output: the results go back to the program that ran `vault url`.
    public static let standardOutput = CallbackDestination(description: "-", isNetwork: false)

    private init(description: String, isNetwork: Bool) {
        self.description = description
        self.isNetwork = isNetwork
    }

    /// The destination of a callback URL (`x-success`), or nil when it is not one vault will
    /// send results to.
    ///
    /// The callback is handed on as it is written, so it must mean one thing to every
    /// parser on the way: a backslash (which browsers read as `/`), userinfo (`user@`),
    /// whitespace and control characters are refused outright, and a network host must be
    /// plain ASCII `[a-z0-9.-]` or a bracketed IPv6 address, with an optional port.
    public init?(callback: String) {
        guard let colon = callback.firstIndex(of: ":"),
              !callback.unicodeScalars.contains(where: { $0 == "\\" || $0.properties.isWhitespace || TerminalText.needsEscape($0) })
        else { return nil }
        let scheme = callback[..<colon].lowercased()
        // RFC 3986 §3.1: a letter, then letters, digits, + - .
        guard let first = scheme.unicodeScalars.first, first.isASCIILetter,
              scheme.unicodeScalars.allSatisfy({ $0.isASCIILetter || ("0"..."9").contains($0) || "+-.".unicodeScalars.contains($0) }),
              !Self.refusedSchemes.contains(scheme)
        else { return nil }
        guard Self.networkSchemes.contains(scheme) else {
            self.init(description: scheme + ":", isNetwork: false)
            return
        }
        let rest = callback[callback.index(after: colon)...]
        guard rest.hasPrefix("//") else { return nil }
        let authority = rest.dropFirst(2).prefix { !"/?#".contains($0) }.lowercased()
        guard let host = Self.hostAndPort(authority) else { return nil }
        self.init(description: "\(scheme)://\(host)", isNetwork: true)
    }

    /// Whether `text`, a valid scheme when read as one, reads as a host: a name with a dot
    /// and no colon, or a name, a colon and a port.
    private static func readsAsHost(_ text: String) -> Bool {
        guard let colon = text.firstIndex(of: ":") else {
            return text.contains(".") && CallbackDestination(callback: text + ":") != nil
        }
        let port = text[text.index(after: colon)...]
        return !port.isEmpty && port.allSatisfy(\.isASCIIDigit) && CallbackDestination(callback: text) != nil
    }

    /// `host[:port]` in canonical form, or nil for anything else (userinfo included).
    private static func hostAndPort(_ authority: String) -> String? {
        var host = Substring(authority), port: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[...close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                port = after.dropFirst()
            }
            guard host.dropFirst().dropLast().allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return nil }
        } else {
            if let colon = authority.firstIndex(of: ":") {
                host = authority[..<colon]
                port = authority[authority.index(after: colon)...]
            }
            guard host.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "." || $0 == "-" }) else { return nil }
        }
        guard !host.isEmpty else { return nil }
        if let port {
            guard let number = UInt16(port), number > 0, String(number) == port else { return nil }
            return "\(host):\(number)"
        }
        return String(host)
    }

    /// A destination as the user names it for the allowlist: `-`, `myapp`, `myapp:`, or a
    /// URL whose origin is taken (`https://example.com/path` allows `https://example.com`).
    ///
    /// A bare name with a dot (`example.com`), or a name and a port (`localhost:3000`), is
    /// refused as ambiguous: it reads as a web site, and taken as the scheme `example.com:`
    /// (which it may be: reverse-DNS app schemes have dots) it would allow something other
    /// than what its author meant. The author writes `https://example.com` or `example.com:`.
    public init(allowing text: String) throws(VaultError) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed == "-" {
            self = .standardOutput
            return
        }
        if trimmed.utf8.count <= 256, Self.readsAsHost(trimmed) {
            throw .ambiguousDestination(trimmed)
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
