import Foundation
import VaultCore
import VaultRelayProtocol

/// `$VAULT_HOME/relay-outbox`, at 0700: the shares of each message this identity sent,
/// kept so that it can answer a recipient's resend request by storing the very same shares
/// again (same id, same numbers), until every recipient confirmed it or it expired.
///
/// What it keeps is what the relays were given: ciphertext pieces, and key shares sealed
/// to the recipients. The sender cannot open them itself, so a thief of the sender's disk
/// learns from the outbox only what a thief of all the relays would.
struct RelayOutbox {
    let directory: String

    init(home: VaultHome) throws(VaultError) {
        directory = home.directory + "/relay-outbox"
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw .fileSystem(path: directory, reason: String(cString: strerror(errno)))
        }
    }

    /// Where share `index` (1 … n) of a kept message is.
    func path(of message: [UInt8], index: Int) -> String { "\(directory)/\(message.hex)/\(index).vmsg" }

    /// Moves a sent message's share files (in relay order) into the outbox, then records
    /// it: a crash in between leaves files without a row, which ``prune`` removes.
    func keep(_ paths: [String], header: MessageHeader, keystore: Keystore) throws(VaultError) {
        let folder = "\(directory)/\(header.messageID.hex)"
        if mkdir(folder, 0o700) != 0 && errno != EEXIST {
            throw .fileSystem(path: folder, reason: String(cString: strerror(errno)))
        }
        for (j, path) in paths.enumerated() where rename(path, self.path(of: header.messageID, index: j + 1)) != 0 {
            let reason = String(cString: strerror(errno))
            remove(header.messageID)
            throw .fileSystem(path: folder, reason: reason)
        }
        try keystore.keepSent(message: header.messageID, group: header.groupID, shares: paths.count, expiresAt: header.expiresAt,
                              recipients: header.recipients)
    }

    /// The signed header of a kept message, from its first share: how many relays must
    /// store it again for a resend to count.
    func header(of message: [UInt8]) throws -> MessageHeader {
        let source = try FileSource(path: path(of: message, index: 1))
        var share = IncomingMessageShare(maximumLength: IncomingMessageShare.largest)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while share.header == nil {
            let count = try buffer.withUnsafeMutableBytes { try source.read(into: $0) }
            guard count > 0 else { throw VaultError.truncated(what: "the kept message share") }
            try buffer.withUnsafeBytes { try share.take(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
        }
        return share.header!
    }

    /// Forgets a kept message: its row, then its files.
    func drop(_ message: SentMessage, keystore: Keystore) throws(VaultError) {
        try keystore.forgetSent(message: message.id)
        remove(message.id)
    }

    /// Drops what expired, and folders that no row names (a crash between moving and
    /// recording). Returns the messages still kept.
    func prune(keystore: Keystore, now: UInt64) throws(VaultError) -> [SentMessage] {
        var kept: [SentMessage] = []
        for message in try keystore.sentMessages() {
            if message.expiresAt <= now { try drop(message, keystore: keystore) } else { kept.append(message) }
        }
        let named = Set(kept.map(\.id.hex))
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where !named.contains(name) {
            if let id = [UInt8](hexID: name) { remove(id) }
        }
        return kept
    }

    private func remove(_ message: [UInt8]) {
        let folder = "\(directory)/\(message.hex)"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] { unlink(folder + "/" + name) }
        rmdir(folder)
    }
}
