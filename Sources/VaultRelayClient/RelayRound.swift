import Foundation
import VaultCore

/// What one reading of the relays covered: when it began, and which relays of each group
/// were read through (listed, and every message they listed taken, now or before).
///
/// An emergency wait is released only after a round that began once the wait had ended
/// and that heard everything the secret's dealer could have stored for this holder: the
/// dealer's denial, stored before the wait ended, is then always read before the release.
public struct RelayRound: Sendable {
    /// When the round began listing, by this machine's clock.
    public let started: Date
    /// Per group id: the relays (by place in the group's list) read through.
    private(set) var readThrough: [[UInt8]: Set<Int>] = [:]

    /// A round that begins now.
    public init(started: Date = VaultClock.now()) {
        self.started = started
    }

    /// Records that `group`'s relays at `relays` were read through.
    mutating func read(_ group: GroupRecord, relays: Set<Int>) {
        readThrough[group.id, default: []].formUnion(relays)
    }

    /// Whether this round heard everything `dealer` stored for this identity before it
    /// began: in every group both are members of, enough relays were read through that any
    /// message stored on ``HolderMail/minimumRelays(_:)`` of them (as every holder message
    /// must be to count as sent) was among them. With no such group the dealer has no way
    /// through relays to this holder, and nothing to wait for.
    public func heardEverything(from dealer: KeyCard, in groups: [GroupRecord], identity: Identity) -> Bool {
        groups.filter { group in
            group.members.contains { $0.card == dealer } && group.members.contains { $0.card == identity.card }
        }.allSatisfy { group in
            // A message on m of n relays misses at most n − m of them.
            let needed = group.relays.count - HolderMail.minimumRelays(group) + 1
            return (readThrough[group.id]?.count ?? 0) >= needed
        }
    }
}
