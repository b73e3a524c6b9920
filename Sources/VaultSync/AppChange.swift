import Foundation
import VaultCore

/// A change to one of an application's objects, as an app receives it (Docs/API.md,
/// "Changes"): a new value, a deletion, or a concurrent value kept as a conflict copy.
///
/// Changes carry what the object is now, not every step it took: an app that was away is
/// told each object's current value once. Applying a change twice does no harm, and an app
/// may be handed one again after a crash, so apply them as upserts and deletes.
public struct AppChange: @unchecked Sendable {
    // @unchecked: `value` is the app's own Decodable type, immutable once decoded.

    /// What happened to the object.
    public enum Kind: String, Sendable {
        /// It has a new current value: `value`.
        case put
        /// It was deleted.
        case delete
        /// A write made without seeing the current value lost to it; `value` is the losing
        /// value, kept beside the object (``AppStore/conflicts(_:of:)``) until the object is
        /// next written. The current value does not change.
        case conflict
    }

    /// What happened.
    public let kind: Kind
    /// The object's type, as named in the app's namespace.
    public let type: String
    /// The object's id.
    public let id: String
    /// The version that did it: the author's Lamport counter and key. The same on every
    /// holder's machine.
    public let version: ItemVersion
    /// Its author's name: you, or the trusted peer who wrote it.
    public let author: String
    /// Made on this machine (by this app, another program, or `vault item` commands).
    public let isLocal: Bool
    /// Its place in this keystore's feed (``AppStore/watch(after:reporting:_:)`` resumes after it).
    public let sequence: Int64
    /// When this machine learnt of it.
    public let date: Date
    /// The value's JSON, as stored; nil for a delete.
    public let json: Data?
    /// The value, decoded as the Swift type the store was opened with for ``type``; nil for a
    /// delete, a type the store does not know, or JSON that does not decode as it.
    public let value: Any?
    /// The Swift type the store was opened with for ``type``, if any (a delete's too).
    public let objectType: Any.Type?

    /// The value decoded as `T`.
    public func value<T: Decodable>(as _: T.Type) throws -> T {
        guard let json else { throw VaultError.invalidAppObject("\(type) \(id) was deleted: it has no value") }
        return try JSONDecoder().decode(T.self, from: json)
    }
}

/// An object as this machine holds it (``AppStore/object(type:id:)``).
public struct AppObjectState: Sendable {
    /// One held value: the current one, or a conflict copy.
    public struct Value: Sendable {
        /// The version that wrote it.
        public let version: ItemVersion
        /// Its author's name.
        public let author: String
        /// The value's JSON.
        public let json: Data
    }

    /// The object's type.
    public let type: String
    /// The object's id.
    public let id: String
    /// The current value; nil when the object is deleted (it may still have conflict copies).
    public let current: Value?
    /// Concurrent values that lost to the current one, highest version first.
    public let conflicts: [Value]
}

/// What a sync did (``AppStore/sync(_:)``).
public struct AppSyncReport: Sendable {
    /// Changes handed to the app.
    public var delivered = 0
    /// Changes of this machine sent to the relays.
    public var sent = 0
    /// What went wrong without stopping the sync, one line each: a relay that could not be
    /// reached, a change that was refused (it names its author).
    public var problems: [String] = []
}
