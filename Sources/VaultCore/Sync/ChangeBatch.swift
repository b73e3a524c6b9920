import GRDB

/// Changes received in one message, applied with few disk flushes: in transactions of up to
/// ``maximumChanges`` changes or ``maximumBytes`` of content, each change in a savepoint of
/// its own (``Keystore/applyingChanges(_:)``). A change is still applied whole or not at all,
/// and one refused leaves the others; a crash loses the transaction under way, whose message
/// is not confirmed yet, so the next sync applies it again. One transaction a change would
/// flush the disk once a change: some 6 ms each on an ordinary disk, 0.6 s for 100 objects.
public final class ChangeBatch {
    /// Changes applied in one transaction at most.
    public static let maximumChanges = 256
    /// Bytes of content stored in one transaction, past which it commits: the write lock is
    /// not held long while other vault processes wait for it.
    public static let maximumBytes: UInt64 = 8 << 20

    private let keystore: Keystore
    private let db: Database
    private var changes = 0
    private var bytes: UInt64 = 0

    init(keystore: Keystore, db: Database) {
        self.keystore = keystore
        self.db = db
    }

    /// Applies one change (``Keystore/apply(_:record:content:itemKey:authors:)``). Its
    /// author must have been asked of `authors` before the batch began: the batch holds the
    /// keystore, which the answer would read.
    @discardableResult
    public func apply<Content: ByteSource>(_ change: ItemChange, record: [UInt8], content: (() throws -> Content)?,
                                           itemKey: (ItemHeader) throws -> SecureBytes?, authors: AuthorChecks) throws -> ChangeOutcome {
        guard let refusal = authors.known(change.author, keyID: change.keyID) else {
            throw VaultError.unexpected("an author was not checked before the batch")
        }
        if let refusal { throw VaultError.malformed(what: "the item change", detail: refusal) }
        return try Keystore.storage(on: keystore.home.directory) {
            if !db.isInsideTransaction { try db.beginTransaction(.immediate) }
            var outcome = ChangeOutcome.duplicate
            try db.inSavepoint {
                outcome = try keystore.applyChange(change, record: record, content: content, itemKey: itemKey, db)
                return .commit
            }
            changes += 1
            bytes += change.contentLength
            if changes >= Self.maximumChanges || bytes >= Self.maximumBytes { try commit() }
            return outcome
        }
    }

    func commit() throws {
        if db.isInsideTransaction { try db.commit() }
        changes = 0
        bytes = 0
    }

    func abandon() {
        if db.isInsideTransaction { try? db.rollback() }
    }
}

extension Keystore {
    /// Runs `body` with a ``ChangeBatch`` that applies the changes it is given; what is
    /// applied is committed when `body` returns, and the transaction under way is rolled
    /// back when it throws. `body` must not use the keystore otherwise: the batch holds it.
    public func applyingChanges<T>(_ body: (ChangeBatch) throws -> T) throws -> T {
        try Self.storage(on: home.directory) {
            try database.writeWithoutTransaction { db in
                let batch = ChangeBatch(keystore: self, db: db)
                do {
                    let result = try body(batch)
                    try batch.commit()
                    return result
                } catch {
                    batch.abandon()
                    throw error
                }
            }
        }
    }
}
