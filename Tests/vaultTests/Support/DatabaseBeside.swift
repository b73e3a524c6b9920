import GRDB

extension DatabaseQueue {
    /// A connection to a database another process holds (a relay's store, a keystore a
    /// command is using): it waits for that process's transaction, up to 20 s, as the
    /// processes themselves do, instead of failing at once with SQLITE_BUSY when the other
    /// side is slow (a loaded CI machine).
    static func beside(_ path: String) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.busyMode = .timeout(20)
        return try DatabaseQueue(path: path, configuration: configuration)
    }
}
