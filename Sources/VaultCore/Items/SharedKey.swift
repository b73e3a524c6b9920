import CSodium
import Foundation
import GRDB

/// A shared encryption key: 32 random bytes, held whole only while unlocked.
///
/// An item is never encrypted under the key itself but under an item key derived from it
/// and the item's header hash: `BLAKE2b-256(key = K, "vault/v1/item" ‖ header_hash)`.
/// This binds the public header (key id, type, title, description) to the content, and it
/// lets the agent hand out one item's key without ever handing out K.
public enum SharedKey {
    /// The length of a shared key and of an item key.
    public static let length = 32

    /// The item key for the header whose hash is `headerHash`.
    public static func itemKey(_ key: SecureBytes, headerHash: [UInt8]) -> SecureBytes {
        precondition(key.count == length && headerHash.count == 32)
        Sodium.ready
        let out = SecureBytes(count: length)
        let message = Array("vault/v1/item".utf8) + headerHash
        key.withUnsafeBytes { k in
            out.withUnsafeMutableBytes { o in
                _ = crypto_generichash(o.bindMemory(to: UInt8.self).baseAddress!, length, message, UInt64(message.count),
                                       k.bindMemory(to: UInt8.self).baseAddress!, k.count)
            }
        }
        return out
    }

    /// The hash an item key is derived from, for a header (what the agent is sent).
    public static func headerHash(_ header: ItemHeader) -> [UInt8] { header.hash }
}

/// A shared key this keystore holds a share of: the newest stored secret that carries it,
/// and how many items it encrypts here.
public struct KeyHolding: Sendable {
    /// The key's id, which items name.
    public let keyID: [UInt8]
    /// The newest share of it (a reshare without a new value carries the same key id).
    public let secret: StoredSecret
    /// Items under it in this keystore.
    public let itemCount: Int

    /// The local name of its newest share, or the key id's first 16 hex digits.
    public var displayName: String { secret.name ?? String(keyID.hex.prefix(16)) }
}

extension Keystore {
    /// Every shared key held, newest first.
    public func sharedKeys() throws(VaultError) -> [KeyHolding] {
        let secrets = try secrets().filter { $0.header.type == .key }
        let counts: [Data: Int] = try read { db in
            Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT key_id, count(*) FROM item GROUP BY key_id").map {
                ($0[0] as Data, $0[1] as Int)
            })
        }
        var seen = Set<[UInt8]>()
        return secrets.compactMap { secret in
            guard let keyID = secret.header.keyID, seen.insert(keyID).inserted else { return nil }
            return KeyHolding(keyID: keyID, secret: secret, itemCount: counts[Data(keyID)] ?? 0)
        }
    }

    /// The shared key with this local name, or whose key id or secret id starts with these
    /// hex digits (at least 4).
    public func sharedKey(matching text: String) throws(VaultError) -> KeyHolding {
        let keys = try sharedKeys()
        if let named = keys.first(where: { $0.secret.name?.lowercased() == text.lowercased() }) { return named }
        if let secret = try? secret(matching: text), secret.header.type != .key { throw .notAKey(text) }
        let hex = text.lowercased()
        guard hex.count >= 4, hex.allSatisfy(\.isHexDigit) else { throw .unknownKey(text) }
        let matches = keys.filter { $0.keyID.hex.hasPrefix(hex) || $0.secret.header.secretIDHex.hasPrefix(hex) }
        guard matches.count <= 1 else { throw .ambiguousSecret(text) }
        guard let found = matches.first else { throw .unknownKey(text) }
        return found
    }

    /// The shared key with this id, if a share of it is held.
    public func sharedKey(id: [UInt8]) throws(VaultError) -> KeyHolding? {
        try sharedKeys().first { $0.keyID == id }
    }

    /// How many items would become impossible to open if `secret` were removed: those of
    /// its key, when no other share of that key is held.
    public func itemsOrphaned(byRemoving secret: StoredSecret) throws(VaultError) -> Int {
        guard let keyID = secret.header.keyID else { return 0 }
        let others = try secrets().filter { $0.header.keyID == keyID && $0.header.secretID != secret.header.secretID }
        return others.isEmpty ? try items(keyID: keyID).count : 0
    }
}
