/// Names for the authors of item changes: this identity's label, a trusted peer's, or the
/// Ed25519 key's first 8 hex digits.
public struct AuthorNames: Sendable {
    private let names: [[UInt8]: String]

    /// The names this keystore knows: its own label and its peers'.
    public init(_ keystore: Keystore) throws(VaultError) {
        let me = try keystore.identityInfo()
        var names = Dictionary(try keystore.peers().map { ($0.card.signingKey, $0.label.value) }, uniquingKeysWith: { a, _ in a })
        names[me.card.signingKey] = me.label.value
        self.names = names
    }

    /// The name of the author whose Ed25519 key is `signingKey`.
    public func name(_ signingKey: [UInt8]) -> String { names[signingKey] ?? String(signingKey.hex.prefix(8)) }
}
