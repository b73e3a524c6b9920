/// Where a peer can be reached: `HOST:PORT`, with an IPv6 host in brackets (`[::1]:7733`).
public struct PeerAddress: Hashable, Sendable, CustomStringConvertible {
    /// A host name, an IPv4 address or an IPv6 address (without brackets).
    public let host: String
    /// The TCP port, 1 to 65535.
    public let port: UInt16

    /// Parses `HOST:PORT`.
    public init(_ text: String) throws(VaultError) {
        let host: Substring, portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"),
                  text[text.index(after: close)...].hasPrefix(":")
            else { throw .invalidAddress(text, reason: "expected [IPV6]:PORT") }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
            guard !host.isEmpty, host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw .invalidAddress(text, reason: "not an IPv6 address")
            }
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                throw .invalidAddress(text, reason: "expected HOST:PORT")
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            guard !host.isEmpty, host.utf8.count <= 253,
                  host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") })
            else { throw .invalidAddress(text, reason: "not a host name or IPv4 address") }
        }
        guard !portText.isEmpty, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let port = UInt16(portText), port > 0 else {
            throw .invalidAddress(text, reason: "the port must be a number from 1 to 65535")
        }
        self.host = String(host)
        self.port = port
    }

    public var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
