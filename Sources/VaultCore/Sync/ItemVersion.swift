/// The version of one change to a synced item (Docs/RELAY.md, "Object sync"): a Lamport
/// counter and the author's signing key.
///
/// Versions are totally ordered: the higher counter first, and between equal counters the
/// author's key bytes, compared as unsigned bytes. Every holder orders two versions the
/// same way without asking anyone, which is what lets them converge; an author never
/// reuses a counter (it counts past every version it has seen), so two changes with one
/// version are the same change.
public struct ItemVersion: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The author's Lamport counter when it made the change.
    public let counter: UInt64
    /// The author's Ed25519 key (32 bytes).
    public let author: [UInt8]

    /// A version.
    public init(counter: UInt64, author: [UInt8]) {
        precondition(author.count == 32)
        self.counter = counter
        self.author = author
    }

    public static func < (a: ItemVersion, b: ItemVersion) -> Bool {
        a.counter != b.counter ? a.counter < b.counter : a.author.lexicographicallyPrecedes(b.author)
    }

    /// `COUNTER.AUTHOR`, the author's key as its first 8 hex digits: how people name a
    /// version (`vault item history`, `vault item resolve --keep`).
    public var description: String { "\(counter).\(author.hex.prefix(8))" }

    /// Whether `text` names this version (`COUNTER.HEX`, any prefix of the author's key of
    /// at least 4 hex digits).
    public func isNamed(by text: String) -> Bool {
        let parts = text.lowercased().split(separator: ".", maxSplits: 1)
        guard parts.count == 2, UInt64(parts[0]) == counter, parts[1].count >= 4 else { return false }
        return author.hex.hasPrefix(String(parts[1]))
    }
}
