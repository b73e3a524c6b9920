import Foundation
import VaultCore
import VaultRelayProtocol

/// `vault relay invite`: an invite for someone the operator lets own groups on a relay whose
/// policy lists its owners (Docs/RELAY.md, "Operator policy"). Written into the relay's
/// store, so a running relay (every process sharing the store) honours it at once.
public enum RelayInvites {
    /// Makes an invite good for `uses` owners for `lifetime` seconds, stores its hash, and
    /// returns its text, which is shown once and kept nowhere.
    public static func create(in location: RelayConfiguration.Store, uses: Int, lifetime: UInt64) async throws -> String {
        let (text, hash) = RelayInvite.make()
        let now = VaultClock.seconds()
        switch location {
        case .sqlite(let path):
            try await SQLiteRelayStore(path: path).addInvite(hash: hash, uses: uses, expires: now + lifetime, now: now)
        case .postgres(let url):
            let store = PostgresRelayStore(try PostgresRelayStore.Location(url: url), waiters: MessageWaiters())
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await store.run() }
                defer { group.cancelAll() }
                try await store.prepare()
                try await store.addInvite(hash: hash, uses: uses, expires: now + lifetime, now: now)
            }
        }
        return text
    }
}
