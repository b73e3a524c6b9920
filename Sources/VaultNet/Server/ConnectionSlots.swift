import Foundation
import NIOCore

/// Which connections `vault serve` keeps when more knock than it will hold.
///
/// A connection is *handshaking* until the Noise handshake proves the other side's key, then
/// *established*. Each state has its own bound, so memory and descriptors stay bounded
/// whatever arrives.
///
/// Handshaking connections prove nothing and cost an attacker nothing, so a full handshaking
/// table does not refuse the newcomer: it closes its oldest member. Connections held open
/// on purpose (idle, or dribbling a handshake a byte at a time) then cannot keep a peer
/// out; they only push each other out sooner. A peer's handshake takes one round trip, so
/// it is lost only if `handshaking` newer connections arrive within that round trip.
/// Established connections belong to keys the handshake proved; they are never evicted,
/// and past their bound a newcomer is refused with `busy`.
final class ConnectionSlots: @unchecked Sendable {
    private let lock = NSLock()
    private let handshakingLimit: Int
    private let establishedLimit: Int
    private var handshaking: [UInt64: Channel] = [:]
    private var established: Set<UInt64> = []
    private var next: UInt64 = 0

    init(handshaking: Int = NetLimits.handshakingConnections, established: Int = NetLimits.establishedConnections) {
        handshakingLimit = handshaking
        establishedLimit = established
    }

    /// Admits a new connection as handshaking, closing the oldest handshaking one if the
    /// table is full; returns its ticket and whether one was evicted.
    func admit(_ channel: Channel) -> (ticket: UInt64, evicted: Bool) {
        let (ticket, victim) = lock.withLock { () -> (UInt64, Channel?) in
            var victim: Channel?
            if handshaking.count >= handshakingLimit, let oldest = handshaking.keys.min() {
                victim = handshaking.removeValue(forKey: oldest)
            }
            next += 1
            handshaking[next] = channel
            return (next, victim)
        }
        victim?.close(promise: nil)
        return (ticket, victim != nil)
    }

    /// Moves a connection whose handshake completed to the established table; false if that
    /// table is full or the connection was evicted meanwhile.
    func establish(_ ticket: UInt64) -> Bool {
        lock.withLock {
            guard handshaking.removeValue(forKey: ticket) != nil, established.count < establishedLimit else { return false }
            established.insert(ticket)
            return true
        }
    }

    /// Frees a connection's slot when it ends, whatever state it reached; true if it was
    /// established.
    @discardableResult
    func release(_ ticket: UInt64) -> Bool {
        lock.withLock {
            handshaking.removeValue(forKey: ticket)
            return established.remove(ticket) != nil
        }
    }

    /// Connections held now, in each state.
    var counts: (handshaking: Int, established: Int) { lock.withLock { (handshaking.count, established.count) } }
}
