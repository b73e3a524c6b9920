import VaultCore

/// Why an application's store cannot do what it was asked (Docs/API.md, "Errors"). Errors of
/// the layers below (``VaultError``: a key that is locked, a name that breaks the rules;
/// relays' refusals) come through as they are.
public enum AppError: UserFacingError, Equatable, Sendable {
    /// No `vault serve` runs for the keystore: there is no agent to hold the key.
    case noAgent
    /// The key is not tied to a group, and no group was named to tie it to.
    case notSynced(key: String)
    /// The key syncs through another group than the one named.
    case otherGroup(key: String, group: String)
    /// This identity is not a member of the group named.
    case notAMember(group: String)
    /// Writing or syncing needs the identity's private keys, and the store was opened
    /// without them (for reading).
    case readOnly
    /// This machine's changes could not be sent (they stay here, and go at the next sync);
    /// what arrived was applied.
    case unsent(String)

    public var description: String {
        switch self {
        case .noAgent: "no 'vault serve' runs for this keystore, so no key is unlocked for the app"
        case .notSynced(let key): "key '\(key)' is not synced through a group"
        case .otherGroup(let key, let group): "key '\(key)' syncs through group \(group), not the one named"
        case .notAMember(let group): "you are not a member of group \(group)"
        case .readOnly: "the store was opened for reading only"
        case .unsent(let why): "this machine's changes were not sent: \(why)"
        }
    }

    /// What the user can do about it.
    public var hint: String? {
        switch self {
        case .noAgent: "start 'vault serve' and unlock the key with 'vault unlock KEY --for 24h'"
        case .notSynced(let key): "tie it to a group once: 'vault key sync \(key) --group GROUP'"
        case .otherGroup(let key, _): "name no group (the key's own is used), or tie it again with 'vault key sync \(key) --group GROUP'"
        case .notAMember: "'vault group list' shows your groups"
        case .readOnly: nil
        case .unsent: "check the relays with 'vault relay check'"
        }
    }
}
