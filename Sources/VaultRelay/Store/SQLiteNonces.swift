import Foundation
import GRDB

/// The request nonces of an SQLite relay, in a file of their own beside the store
/// (`STORE.nonces`, mode 0600).
///
/// Every signed request writes one. In the store's own file that write changed the
/// database under every reader: SQLite then empties a reading connection's page cache at
/// its next read, so each list and fetch read its pages again from the file and the log, a
/// tenth of the relay's CPU time for a list. Kept apart, a nonce changes nothing the
/// readers cache, and its write no longer waits behind a message's upload on the store's
/// one writer. Nonces are not secret and live minutes; they are still kept on disk, so a
/// request is refused as a replay across a restart (Docs/RELAY.md, "SQLite").
///
/// Nonces that arrive while one write runs are kept together by the next: one transaction
/// and one commit for all of them (a group commit), where each had its own before. Every
/// request is still answered only once its nonce is in the file, and a nonce twice in one
/// batch is a replay for the second, as the inserts run in order.
final class SQLiteNonces: @unchecked Sendable {
    private let queue: DatabaseQueue
    /// A nonce waiting for the next write, and the request that waits for its answer.
    private typealias Waiting = (nonce: [UInt8], expires: UInt64, answer: CheckedContinuation<Bool, any Error>)
    /// Guards `waiting` and `writing`.
    private let lock = NSLock()
    private var waiting: [Waiting] = []
    /// Whether a task is writing batches; it writes until none waits.
    private var writing = false
    /// Keeps a nonce unless it is kept already.
    private static let insert = "INSERT OR IGNORE INTO nonces (nonce, expires) VALUES (?, ?)"

    /// Opens (or makes, owned as `store` is) `path`.
    init(path: String, ownedLike store: String) throws {
        try SQLiteRelayStore.createPrivately(path, ownedLike: store)
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            // As the store: a commit does not wait for the disk, and a power cut can lose the
            // last ones (requests within the window that could then be replayed once), never
            // corrupt the file.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        // WAL, so a commit appends to the log instead of writing a journal and the file.
        configuration.journalMode = .wal
        do {
            queue = try DatabaseQueue(path: path, configuration: configuration)
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE IF NOT EXISTS nonces (nonce BLOB PRIMARY KEY, expires INTEGER NOT NULL)")
            }
        } catch let error as DatabaseError {
            throw RelayStartFailure("cannot open \(path): \(error.message ?? "SQLite error \(error.resultCode.rawValue)")")
        }
    }

    /// Keeps `nonce` until `expires`; false when it is already kept (a replay).
    func remember(_ nonce: [UInt8], expires: UInt64) async throws -> Bool {
        try await withCheckedThrowingContinuation { answer in
            let starts = lock.withLock {
                waiting.append((nonce, expires, answer))
                defer { writing = true }
                return !writing
            }
            if starts { Task { await writeBatches() } }
        }
    }

    /// Writes what waits, one batch a transaction, until nothing does. A batch that fails
    /// fails each of its requests (they are answered as the store's errors are), not the
    /// next batch.
    private func writeBatches() async {
        while true {
            let batch = lock.withLock {
                defer { waiting = [] }
                if waiting.isEmpty { writing = false }
                return waiting
            }
            guard !batch.isEmpty else { return }
            do {
                let kept = try await queue.write { db in
                    let statement = try db.cachedStatement(sql: Self.insert)
                    return try batch.map { waiting in
                        try statement.execute(arguments: [Data(waiting.nonce), Int64(waiting.expires)])
                        return db.changesCount == 1
                    }
                }
                for (waiting, isNew) in zip(batch, kept) { waiting.answer.resume(returning: isNew) }
            } catch {
                for waiting in batch { waiting.answer.resume(throwing: error) }
            }
        }
    }

    /// Keeps the nonces a store from before this file held (`v1-relay`'s table).
    func adopt(_ rows: [(nonce: Data, expires: Int64)]) throws {
        guard !rows.isEmpty else { return }
        try queue.write { db in
            for row in rows { try db.cachedStatement(sql: Self.insert).execute(arguments: [row.nonce, row.expires]) }
        }
    }

    /// Forgets nonces whose requests could no longer pass the clock window.
    func sweep(now: UInt64) async throws {
        try await queue.write { db in try db.execute(sql: "DELETE FROM nonces WHERE expires <= ?", arguments: [Int64(now)]) }
    }
}
