import ArgumentParser
import Foundation
import VaultCore

/// Shell completion of what the keystore names: peer labels, secrets and keys (by name and
/// id), groups and relays. The shells call the binary back as the person types; the keystore
/// is the one `--home` names on the command line being typed, else the default, and is only
/// read. A list option (`--to bob,carol`) completes its last item.
enum Completions {
    static let peer = CompletionKind.custom { words, _, prefix in names(words, prefix) { try $0.peers().map(\.label.value) } }
    static let peers = CompletionKind.custom { words, _, prefix in list(words, prefix) { try $0.peers().map(\.label.value) } }
    static let secret = CompletionKind.custom { words, _, prefix in
        names(words, prefix) { keystore in try keystore.secrets().flatMap { [$0.name, String($0.header.secretIDHex.prefix(16))].compactMap { $0 } } }
    }
    static let group = CompletionKind.custom { words, _, prefix in names(words, prefix) { try $0.groups().map(\.name.value) } }
    static let relay = CompletionKind.custom { words, _, prefix in names(words, prefix) { try $0.pinnedRelays().map(\.label.value) } }
    static let relays = CompletionKind.custom { words, _, prefix in list(words, prefix) { try $0.pinnedRelays().map(\.label.value) } }

    /// The candidates that start with `prefix`.
    private static func names(_ words: [String], _ prefix: String, _ all: (Keystore) throws -> [String]) -> [String] {
        guard let keystore = keystore(words), let names = try? all(keystore) else { return [] }
        return names.filter { $0.lowercased().hasPrefix(prefix.lowercased()) }.sorted()
    }

    /// For a comma-separated list: the items already typed, and each candidate for the last.
    private static func list(_ words: [String], _ prefix: String, _ all: (Keystore) throws -> [String]) -> [String] {
        let typed = prefix.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let done = typed.dropLast().joined(separator: ",")
        let chosen = Set(typed.dropLast().map { $0.lowercased() })
        return names(words, typed.last ?? "", all).filter { !chosen.contains($0.lowercased()) }
            .map { done.isEmpty ? $0 : done + "," + $0 }
    }

    private static func keystore(_ words: [String]) -> Keystore? {
        let explicit = words.firstIndex(of: "--home").flatMap { $0 + 1 < words.count ? words[$0 + 1] : nil }
            ?? words.first { $0.hasPrefix("--home=") }.map { String($0.dropFirst("--home=".count)) }
        return try? Keystore.open(home: VaultHome.resolve(explicit: explicit))
    }
}
