/// What the changes known for one item make of it (Docs/RELAY.md, "Object sync").
///
/// The result depends only on the set of changes, never on the order they came in, so
/// holders that have seen the same changes hold the same item, whatever relays did with
/// their order, their duplicates or their delays:
///
/// - the **heads** are the changes that no known change supersedes;
/// - the **winner** is the head with the highest version: the item's content, or its
///   deletion. Every change has a higher counter than those it supersedes, so the winner
///   is also the highest version known at all;
/// - every other head that is a put is a **conflict copy**: an edit made without seeing
///   the winner, kept beside it rather than lost.
public struct ItemHeads: Equatable, Sendable {
    /// One known change, as far as ordering needs it.
    public struct Entry: Hashable, Sendable {
        public let version: ItemVersion
        public let operation: ItemChange.Operation
        public let supersedes: [ItemVersion]

        public init(version: ItemVersion, operation: ItemChange.Operation, supersedes: [ItemVersion]) {
            self.version = version
            self.operation = operation
            self.supersedes = supersedes
        }

        public init(_ change: ItemChange) {
            self.init(version: change.version, operation: change.operation, supersedes: change.supersedes)
        }
    }

    /// The heads, highest version first.
    public let heads: [Entry]

    /// The heads of `changes` (one entry a version).
    public init(_ changes: some Sequence<Entry>) {
        let all = Array(changes)
        let superseded = Set(all.flatMap(\.supersedes))
        heads = all.filter { !superseded.contains($0.version) }.sorted { $0.version > $1.version }
    }

    /// The change that decides the item, if any change is known.
    public var winner: Entry? { heads.first }

    /// Whether the item is deleted (or nothing is known of it).
    public var isDeleted: Bool { winner?.operation != .put }

    /// Puts that lost to the winner without having been seen by it.
    public var conflicts: [Entry] { heads.dropFirst().filter { $0.operation == .put } }

    /// Every put head, winner first: the versions whose content is kept.
    public var keptPuts: [Entry] { heads.filter { $0.operation == .put } }
}
