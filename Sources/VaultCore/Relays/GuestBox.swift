import Foundation

/// The guest box: holder messages between a member of some group on a relay and a key that
/// shares no group with it there (Docs/RELAY.md, "The guest box"). Social recovery uses it:
/// a new machine pins one relay its owner's friends use and asks them through it, with no
/// group of its own.
///
/// On the wire it is the group whose id is 16 zero bytes, a value no relay lets a group
/// record take: every message route works on it, under the guest box's rules. Here it is a
/// ``GroupRecord`` that is never signed, sent or stored, so that the holder protocol's code
/// that takes a group takes it unchanged.
extension GroupRecord {
    /// The guest box's id on every relay: 16 zero bytes.
    public static let guestBoxID = [UInt8](repeating: 0, count: 16)

    /// Whether this is the guest box, not a group.
    public var isGuestBox: Bool { id == Self.guestBoxID }

    /// The guest box through `relays`, whose members are this identity and `peers` (the
    /// trusted peers: a guest message from any other card is not taken). Nil without a relay.
    public static func guestBox(relays: [Relay], owner: KeyCard, peers: [Member]) -> GroupRecord? {
        guard !relays.isEmpty else { return nil }
        // A label is needed only to print; the guest box has no owner's name for anything.
        let me = Member(label: try! Label("me"), card: owner)
        return GroupRecord(guestBoxID: guestBoxID, name: try! Label("guests"), owner: owner, relays: relays,
                           members: [me] + peers.filter { $0.card != owner })
    }

    /// This guest box without the relays whose cards' fingerprints are in `fingerprints`.
    public func without(relays fingerprints: Set<String>) -> GroupRecord {
        GroupRecord(guestBoxID: id, name: name, owner: owner, relays: relays.filter { !fingerprints.contains($0.card.fingerprint) },
                    members: members)
    }

    private init(guestBoxID id: [UInt8], name: Label, owner: KeyCard, relays: [Relay], members: [Member]) {
        self.id = id
        version = 0
        self.name = name
        self.owner = owner
        self.relays = relays
        self.members = members
        encoded = []
    }
}
