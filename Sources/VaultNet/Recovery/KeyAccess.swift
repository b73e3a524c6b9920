import VaultCore

/// How a command gets an item's key: from the agent when `vault serve` runs, else by
/// recovering the shared key for this one use and forgetting it afterwards.
public struct KeyAccess: Sendable {
    /// The keystore the items belong to.
    public let keystore: Keystore
    /// The agent of this keystore's `vault serve`, if one runs.
    public let agent: AgentClient?

    /// Connects to the keystore's agent, if one runs.
    public static func open(_ keystore: Keystore) async -> KeyAccess {
        KeyAccess(keystore: keystore, agent: await AgentClient.connect(home: keystore.home))
    }

    /// The item key for `header` from the agent; nil when no agent runs or the key is
    /// locked in it.
    public func unlockedItemKey(for header: ItemHeader, holding: KeyHolding) async throws -> SecureBytes? {
        try await agent?.itemKey(keyID: holding.keyID, headerHash: SharedKey.headerHash(header))
    }

    /// The item keys for `headers` (all of `holding`'s key) from the agent, on one
    /// connection; nil for each when no agent runs or the key is locked in it.
    public func unlockedItemKeys(for headers: [ItemHeader], holding: KeyHolding) async throws -> [SecureBytes?] {
        guard let agent else { return headers.map { _ in nil } }
        return try await agent.itemKeys(keyID: holding.keyID, headerHashes: headers.map(SharedKey.headerHash))
    }

    /// The item key for `header`, whose shared key is `holding`. With an agent, a locked
    /// key is an error (`keyLocked`), so `vault lock` means what it says; without one,
    /// `recover` brings the shared key for this call only.
    public func itemKey(for header: ItemHeader, holding: KeyHolding,
                        recover: () async throws -> SecureBytes) async throws -> SecureBytes {
        if agent != nil {
            guard let key = try await unlockedItemKey(for: header, holding: holding) else {
                throw VaultError.keyLocked(holding.displayName)
            }
            return key
        }
        return SharedKey.itemKey(try await recover(), headerHash: SharedKey.headerHash(header))
    }

    /// The item key for `header` from the agent, else from `recover`; a key recovered while
    /// an agent runs is handed to it for `unlockSeconds`, so the next command finds it
    /// unlocked. Returns the key and whether it was recovered here.
    public func itemKeyUnlocking(for header: ItemHeader, holding: KeyHolding, unlockSeconds: UInt32,
                                 recover: () async throws -> SecureBytes) async throws -> (SecureBytes, recovered: Bool) {
        if let key = try await unlockedItemKey(for: header, holding: holding) { return (key, false) }
        let key = try await recover()
        if let agent { try await agent.unlock(keyID: holding.keyID, key: key, seconds: unlockSeconds) }
        return (SharedKey.itemKey(key, headerHash: SharedKey.headerHash(header)), true)
    }
}
