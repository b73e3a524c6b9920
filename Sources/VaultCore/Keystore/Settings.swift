import GRDB

/// Keystore settings: for now, the `vault://` sources allowed to make requests without a
/// terminal to confirm them. Stored as (name, value) rows, `url-allow` and the source.
extension Keystore {
    /// The sources on the URL allowlist, sorted.
    public func urlAllowList() throws(VaultError) -> [String] {
        try read { db in try String.fetchAll(db, sql: "SELECT value FROM setting WHERE name = 'url-allow' ORDER BY value") }
    }

    /// Whether `source` (an `x-source` value, compared exactly) is on the allowlist.
    public func isURLSourceAllowed(_ source: String) throws(VaultError) -> Bool {
        try urlAllowList().contains(source)
    }

    /// Adds a source; returns false if it was there already (and nothing was written).
    @discardableResult
    public func allowURLSource(_ source: String) throws(VaultError) -> Bool {
        guard !source.isEmpty, source.utf8.count <= 256, !source.contains(where: \.isNewline) else {
            throw .invalidSecret("a source is 1 to 256 bytes on one line")
        }
        if try isURLSourceAllowed(source) { return false }
        try write { db in try db.execute(sql: "INSERT INTO setting (name, value) VALUES ('url-allow', ?)", arguments: [source]) }
        return true
    }

    /// Removes a source; returns false if it was not there (and nothing was written).
    @discardableResult
    public func denyURLSource(_ source: String) throws(VaultError) -> Bool {
        guard try isURLSourceAllowed(source) else { return false }
        try write { db in try db.execute(sql: "DELETE FROM setting WHERE name = 'url-allow' AND value = ?", arguments: [source]) }
        return true
    }
}
