import VaultCore
import VaultNet

/// Items that a sync stored while their key was locked (Docs/RELAY.md, "Object sync"): their
/// origin and bytes were checked on arrival, their stream is opened once the key is unlocked.
public enum UnopenedItems {
    /// Opens the unopened items of `keyID` (or of every key) whose key is unlocked in the
    /// agent of `access`; returns how many opened, and a line for each that does not open
    /// (by its author), which stays unopened.
    public static func open(keystore: Keystore, only keyID: [UInt8]? = nil, access: KeyAccess) async -> (opened: Int, problems: [String]) {
        let unopened = ((try? keystore.items(keyID: keyID)) ?? []).filter(\.unopened)
        guard !unopened.isEmpty else { return (0, []) }
        let authors = try? AuthorNames(keystore)
        var opened = 0, problems: [String] = []
        for item in unopened {
            guard let holding = try? keystore.sharedKey(id: item.header.keyID),
                  let itemKey = try? await access.unlockedItemKey(for: item.header, holding: holding) else { continue }
            do {
                try keystore.checkUnopened(item, itemKey: itemKey)
                opened += 1
            } catch {
                let author = item.version.map { authors?.name($0.author) ?? String($0.author.hex.prefix(8)) } ?? "?"
                problems.append("item \(item.idHex.prefix(16)) from \(author): \(VaultError.words(for: error)); it stays unopened")
            }
        }
        return (opened, problems)
    }
}
