import Foundation
import GRDB

/// Keystore settings: the `vault://` callback destinations allowed to get results without a
/// terminal to confirm them, and when this keystore last read its groups' relays. Stored as
/// (name, value) rows: `url-allow` and the destination's canonical text
/// (``CallbackDestination``); `relays-read` and Unix seconds.
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

    /// When a round of reading the relays last began here (`vault serve`, `vault receive`,
    /// `vault requests`), if one ever did.
    public func relaysLastRead() throws(VaultError) -> Date? {
        try read { db in
            guard let text = try String.fetchOne(db, sql: "SELECT value FROM setting WHERE name = 'relays-read'"),
                  let seconds = TimeInterval(text) else { return nil }
            return Date(timeIntervalSince1970: seconds)
        }
    }

    /// Records that a round of reading the relays began at `date`.
    public func noteRelaysRead(at date: Date) throws(VaultError) {
        try write { db in
            try db.execute(sql: "DELETE FROM setting WHERE name = 'relays-read'")
            try db.execute(sql: "INSERT INTO setting (name, value) VALUES ('relays-read', ?)", arguments: [String(Int64(date.timeIntervalSince1970))])
        }
    }
}
