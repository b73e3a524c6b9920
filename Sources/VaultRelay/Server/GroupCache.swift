import Foundation
import VaultCore

/// Group records as the relay parsed them, by id: a record is parsed (its owner's
/// signature, and every member's card and label) once per version, not at every upload to
/// its group. Parsing a record of 200 members cost more than the rest of an upload.
///
/// A version of a group is one record: the relay stores only higher versions, from the
/// owner who registered the id, so the id and version name the bytes.
final class GroupCache: @unchecked Sendable {
    /// Records kept; past it the cache starts again empty (a relay with more groups in use
    /// at once parses some again).
    static let capacity = 4096

    private let lock = NSLock()
    private var records: [[UInt8]: GroupRecord] = [:]

    /// The stored record, parsed; nil when it does not parse.
    func record(_ stored: StoredGroup) -> GroupRecord? {
        if let cached = lock.withLock({ records[stored.id] }), cached.version == stored.version { return cached }
        guard let record = try? GroupRecord(parsing: stored.record) else { return nil }
        lock.withLock {
            if records.count >= Self.capacity { records.removeAll(keepingCapacity: true) }
            records[stored.id] = record
        }
        return record
    }
}
