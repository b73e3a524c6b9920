import Foundation

/// A relay's base URL (Docs/FORMAT.md §16, "Relay URLs"): `http://` or `https://`, a host,
/// an optional port, and nothing else, at most 2048 bytes.
///
/// Parsed here byte by byte rather than by Foundation's `URLComponents`, which accepted an
/// empty port (`http://127.0.0.1:`), port 99999, and hosts that other parsers read as other
/// addresses (`0127.0.0.1`, `127.1`, a zone, non-ASCII names that browsers map through
/// IDNA). A group record is signed: its members, relays and an independent implementation
/// must agree on where each URL points, so only one reading is allowed.
public enum RelayURL {
    /// The longest URL, in bytes.
    static let maximumBytes = 2048

    /// Checks `text` as a person typed it, and returns it without a trailing `/`.
    @discardableResult
    public static func check(_ text: String) throws(VaultError) -> String {
        let trimmed = text.hasSuffix("/") ? String(text.dropLast()) : text
        try validate(trimmed, shown: text)
        return trimmed
    }

    /// Checks `text` as a signed record carries it: exactly the form ``check(_:)`` returns,
    /// so a record has one encoding and its members join paths to its URLs as written.
    static func checkCanonical(_ text: String) throws(VaultError) {
        guard !text.hasSuffix("/") else { throw .invalidAddress(text, reason: "a relay URL in a group record has no trailing /") }
        try validate(text, shown: text)
    }

    private static func validate(_ text: String, shown: String) throws(VaultError) {
        func fail(_ reason: String) -> VaultError { .invalidAddress(shown, reason: reason) }
        let bytes = Array(text.utf8)
        guard bytes.count <= maximumBytes else { throw fail("it is longer than 2048 bytes") }
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw fail("a relay URL is ASCII without spaces: write an internationalized name in its xn-- form")
        }
        guard let separator = text.range(of: "://") else { throw fail("a relay URL starts with http:// or https://") }
        let scheme = text[..<separator.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else { throw fail("a relay URL starts with http:// or https://") }
        let authority = String(text[separator.upperBound...])
        guard !authority.contains(where: { "/?#@%\\".contains($0) }) else {
            throw fail("a relay URL is only scheme, host and port (no path, query, fragment, user or %-escapes)")
        }
        let host: Substring, port: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw fail("its IPv6 address has no closing ]") }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let rest = authority[authority.index(after: close)...]
            guard rest.isEmpty || rest.hasPrefix(":") else { throw fail("only a port may follow its IPv6 address") }
            port = rest.isEmpty ? nil : rest.dropFirst()
            try checkIPv6(host, fail)
        } else {
            let parts = authority.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            host = parts[0]
            port = parts.count == 2 ? parts[1] : nil
            guard !host.contains(":") else { throw fail("an IPv6 address goes in brackets") }
            try checkHost(host, fail)
        }
        if let port { try checkPort(port, fail) }
    }

    /// 1 to 65535 in decimal, without leading zeros; present when its `:` is.
    private static func checkPort(_ port: Substring, _ fail: (String) -> VaultError) throws(VaultError) {
        guard !port.isEmpty else { throw fail("its port is empty: write the port after :, or leave out the :") }
        guard port.count <= 5, port.allSatisfy(\.isASCIIDigit), port.first != "0", let value = Int(port), value <= 65535 else {
            throw fail("its port is not 1 to 65535 in decimal without leading zeros")
        }
    }

    /// A DNS name of letters, digits and hyphens (labels of 1 to 63, at most 253 in all, no
    /// trailing dot), or an IPv4 address as four decimal numbers 0 to 255 without leading
    /// zeros. A name whose last label is all digits would read as an address: refused.
    private static func checkHost(_ host: Substring, _ fail: (String) -> VaultError) throws(VaultError) {
        guard !host.isEmpty else { throw fail("it has no host") }
        guard host.count <= 253 else { throw fail("its host name is longer than 253 characters") }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        guard !labels.contains(where: \.isEmpty) else { throw fail("its host has an empty label (two dots, or a dot at an end)") }
        if labels.last.map({ $0.allSatisfy(\.isASCIIDigit) }) ?? false || host.allSatisfy({ $0.isASCIIDigit || $0 == "." }) {
            guard labels.count == 4, labels.allSatisfy({ label in
                label.count <= 3 && label.allSatisfy(\.isASCIIDigit) && (label == "0" || label.first != "0")
                    && Int(label)! <= 255
            }) else {
                throw fail("its address is not IPv4 in dotted decimal (four numbers 0 to 255, no leading zeros)")
            }
            return
        }
        for label in labels {
            guard label.count <= 63 else { throw fail("its host name has a label over 63 characters") }
            guard label.allSatisfy({ $0.isASCIIDigit || $0.isASCIILetter || $0 == "-" }), label.first != "-", label.last != "-" else {
                throw fail("its host name is not letters, digits and inner hyphens")
            }
        }
    }

    /// An IPv6 address as RFC 4291 writes it (inet_pton's reading), with no zone: a zone
    /// (`%eth0`) names an interface of one machine, which means nothing to another.
    private static func checkIPv6(_ host: Substring, _ fail: (String) -> VaultError) throws(VaultError) {
        guard !host.contains("%") else { throw fail("an IPv6 zone (%…) names one machine's interface, and is not allowed") }
        var address = in6_addr()
        guard host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }), inet_pton(AF_INET6, String(host), &address) == 1 else {
            throw fail("its IPv6 address is not valid")
        }
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
    fileprivate var isASCIILetter: Bool { isASCII && isLetter }
}
