import Foundation

/// Bundles not yet delivered: `$VAULT_HOME/outbox/ID-LABEL.vshare`, sealed to their
/// holders, kept at 0600 until `vault secrets push` delivers them.
public struct Outbox: Sendable {
    /// The outbox directory.
    public let directory: String

    /// The outbox of `home`, made at 0700 if it does not exist.
    public init(home: VaultHome) throws(VaultError) {
        directory = home.directory + "/outbox"
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw .fileSystem(path: directory, reason: String(cString: strerror(errno)))
        }
    }

    /// A temporary name for a bundle being written for `label`.
    public func pendingPath(for label: Label) -> String { directory + "/" + VaultHome.transientFileName("\(label).vshare") }

    /// Where the undelivered bundle of `secret` (its hex id) for `label` waits.
    public func path(secret: String, label: Label) -> String { directory + "/\(secret.prefix(32))-\(label).vshare" }

    /// Moves a just-written bundle to its outbox name.
    public func keep(_ pending: String, secret: String, label: Label) throws(VaultError) -> String {
        let target = path(secret: secret, label: label)
        guard rename(pending, target) == 0 else { throw .fileSystem(path: target, reason: String(cString: strerror(errno))) }
        return target
    }
}
