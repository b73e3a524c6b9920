import Synchronization
import VaultCore

/// The relays that could not be reached, or stalled, in one pass over many relays (a
/// group refresh): each is asked nothing more in that pass, so it costs the pass one
/// deadline, not one for every request the pass would make of it.
///
/// A relay is untrusted, and a receive asks each relay it knows for its invitations, then
/// fetches each invitation's record from it one after another. A relay that answered the
/// list (up to 500 invitations naming a trusted owner's card, which it knows from that
/// owner's records) and then stalled on every record held a receive for 30 s a record:
/// hours. Now the first stall is said, once, and the rest of the pass goes without that
/// relay; the next pass asks it again.
final class RelayOutages: Sendable {
    /// The code of the failure of a request not made, for a relay given up on in this pass.
    static let code = "given_up"

    private let relays = Mutex<Set<KeyCard>>([])

    /// Whether `relay` was given up on.
    func contains(_ relay: KeyCard) -> Bool { relays.withLock { $0.contains(relay) } }

    /// Gives up on `relay` when `error` says it could not be reached or stopped answering
    /// ("unreachable", "interrupted": the connection, not the relay's own words).
    func note(_ error: any Error, of relay: KeyCard) {
        guard let error = error as? RelayError, ["unreachable", "interrupted"].contains(error.code) else { return }
        relays.withLock { _ = $0.insert(relay) }
    }

    /// The failure of a request not made to `relay`, named `name`, given up on.
    static func givenUp(_ name: String) -> RelayError {
        RelayError(relay: name, code: code, words: "not asked again in this run: it could not be reached, or stalled, earlier in it")
    }
}
