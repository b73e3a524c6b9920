import GRDB

/// Keystore settings: for now, the `vault://` callback destinations allowed to get results
/// without a terminal to confirm them. Stored as (name, value) rows: `url-allow` and the
/// destination's canonical text (``CallbackDestination``).
extension Keystore {
    /// The destinations on the URL allowlist, sorted.
    public func urlAllowList() throws(VaultError) -> [String] {
        try read { db in try String.fetchAll(db, sql: "SELECT value FROM setting WHERE name = 'url-allow' ORDER BY value") }
    }

    /// Whether results may go to `destination` without asking.
    public func isURLDestinationAllowed(_ destination: CallbackDestination) throws(VaultError) -> Bool {
        try urlAllowList().contains(destination.description)
    }

    /// Adds a destination; returns false if it was there already (and nothing was written).
    @discardableResult
    public func allowURLDestination(_ destination: CallbackDestination) throws(VaultError) -> Bool {
        if try isURLDestinationAllowed(destination) { return false }
        try write { db in try db.execute(sql: "INSERT INTO setting (name, value) VALUES ('url-allow', ?)", arguments: [destination.description]) }
        return true
    }

    /// Removes a destination; returns false if it was not there (and nothing was written).
    @discardableResult
    public func denyURLDestination(_ destination: CallbackDestination) throws(VaultError) -> Bool {
        guard try isURLDestinationAllowed(destination) else { return false }
        try write { db in
            try db.execute(sql: "DELETE FROM setting WHERE name = 'url-allow' AND value = ?", arguments: [destination.description])
        }
        return true
    }
}
