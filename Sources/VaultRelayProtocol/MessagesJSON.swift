import Foundation

extension RelayAPI.Messages {
    /// The body, byte for byte as `JSONEncoder` with `.sortedKeys` writes it
    /// (`{"last":…,"messages":[{"expires":…,"group":"…","id":"…","size":…},…],"next":…}`,
    /// absent cursors left out), written directly. A relay answers every poll with a page of
    /// these, and the encoder's generic containers took a tenth of the relay's CPU time for
    /// a page of 20. A string that would need escaping, which a hex id never does, is left
    /// to `JSONEncoder`, so the two never differ (`MessagesJSONTests`).
    public var json: [UInt8] {
        guard messages.allSatisfy({ Self.isPlain($0.group) && Self.isPlain($0.id) }) else { return encodedByFoundation }
        var out: [UInt8] = []
        out.reserveCapacity(32 + messages.count * 120)
        out.append(ascii: "{")
        if let last {
            out.append(contentsOf: #""last":"#.utf8)
            out.append(contentsOf: String(last).utf8)
            out.append(ascii: ",")
        }
        out.append(contentsOf: #""messages":["#.utf8)
        for (i, entry) in messages.enumerated() {
            if i > 0 { out.append(ascii: ",") }
            out.append(contentsOf: #"{"expires":"#.utf8)
            out.append(contentsOf: String(entry.expires).utf8)
            out.append(contentsOf: #","group":""#.utf8)
            out.append(contentsOf: entry.group.utf8)
            out.append(contentsOf: #"","id":""#.utf8)
            out.append(contentsOf: entry.id.utf8)
            out.append(contentsOf: #"","size":"#.utf8)
            out.append(contentsOf: String(entry.size).utf8)
            out.append(ascii: "}")
        }
        out.append(ascii: "]")
        if let next {
            out.append(contentsOf: #","next":"#.utf8)
            out.append(contentsOf: String(next).utf8)
        }
        out.append(ascii: "}")
        return out
    }

    /// What `JSONEncoder` writes for this page, keys sorted.
    public var encodedByFoundation: [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding plain strings and integers cannot fail.
        return (try? encoder.encode(self)).map { [UInt8]($0) } ?? Array("{}".utf8)
    }

    /// Printable ASCII that JSON writes as it is: no quote, backslash or slash (which
    /// `JSONEncoder` escapes), no control character.
    private static func isPlain(_ text: String) -> Bool {
        text.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7f && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") && $0 != UInt8(ascii: "/") }
    }
}

extension [UInt8] {
    fileprivate mutating func append(ascii: Unicode.Scalar) { append(UInt8(ascii: ascii)) }
}
