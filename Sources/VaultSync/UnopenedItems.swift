import VaultCore
import VaultNet

/// Items that a sync stored while their key was locked (Docs/RELAY.md, "Object sync"): their
/// origin and bytes were checked on arrival, their stream is opened once the key is unlocked.
public enum UnopenedItems {
    /// Items checked in one transaction.
    static let batch = 256

    /// Opens the unopened items of `keyID` (or of every key) whose key is unlocked in the
    /// agent of `access`; returns how many opened, and a line for each that does not open
    /// (by its author), which stays unopened.
    public static func open(keystore: Keystore, only keyID: [UInt8]? = nil, access: KeyAccess) async -> (opened: Int, problems: [String]) {
        let unopened = ((try? keystore.items(keyID: keyID)) ?? []).filter(\.unopened)
        guard !unopened.isEmpty else { return (0, []) }
        // Keys first, then one transaction for a batch of items: a sync of many changes is
        // not a transaction (and a disk flush) each. Batches bound the item keys held at once.
        var holdings: [[UInt8]: KeyHolding?] = [:]
        var opened = 0, problems: [String] = []
        let authors = try? AuthorNames(keystore)
        for start in stride(from: 0, to: unopened.count, by: batch) {
            var keyed: [(item: StoredItem, itemKey: SecureBytes)] = []
            let part = unopened[start..<min(unopened.count, start + batch)]
            for keyID in Set(part.map(\.header.keyID)) {
                if holdings[keyID] == nil { holdings[keyID] = .some(try? keystore.sharedKey(id: keyID)) }
                guard let holding = holdings[keyID] ?? nil else { continue }
                let items = part.filter { $0.header.keyID == keyID }
                let keys = (try? await access.unlockedItemKeys(for: items.map(\.header), holding: holding)) ?? []
                for (item, itemKey) in zip(items, keys) { if let itemKey { keyed.append((item, itemKey)) } }
            }
            let failures: [(item: StoredItem, error: Error)]
            do {
                failures = try keystore.checkUnopened(keyed)
            } catch {
                problems.append("items received while the key was locked stay unopened: \(VaultError.words(for: error))")
                break
            }
            opened += keyed.count - failures.count
            problems += failures.map { item, error in
                let author = item.version.map { authors?.name($0.author) ?? String($0.author.hex.prefix(8)) } ?? "?"
                return "item \(item.idHex.prefix(16)) from \(author): \(VaultError.words(for: error)); it stays unopened"
            }
        }
        return (opened, problems)
    }
}
