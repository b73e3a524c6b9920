import Foundation
import VaultCore

/// Waiting for what the relays of a user's groups hold for it.
enum RelayMail {
    /// Per relay (by card fingerprint): the last message listed.
    typealias Cursors = [String: Int64]

    /// Returns once something may have arrived.
    static func waitForMail(groups: [GroupRecord], identity: Identity, cursors: Cursors) async {
        try? await Task.sleep(for: .seconds(2))
    }

    /// The cursors after what the relays list now.
    static func latest(groups: [GroupRecord], identity: Identity, after cursors: Cursors) async -> Cursors { cursors }
}
