import ArgumentParser
import Foundation
import VaultCore
import VaultNet
import VaultRelayClient

struct Reshare: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Recover a secret and share it again, as a new secret, with other holders or another threshold.",
        discussion: """
            The new secret records the one it replaces. A shared key keeps its value (and its id), \
            so its items still open for the new holders; --rotate gives it a new value instead and \
            re-encrypts your items under it (the old holders can then no longer open them, but \
            their copies made before stay readable to them). Old shares stay valid until their \
            holders delete them ('vault secrets rm'). A password layer is kept, with the same \
            password. The plaintext passes from recovery to the new shares through memory only.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The secret's or key's name or id.", valueName: "id"), completion: Completions.secret)
    var secret: String

    @Option(help: ArgumentHelp("The new holders besides you: trusted peers' labels, comma-separated.", valueName: "labels"), completion: Completions.peers)
    var to: String

    @Option(name: [.customShort("k"), .long], help: ArgumentHelp("How many pieces rebuild the new secret.", valueName: "k"))
    var threshold: Int

    @Flag(help: "For a shared key: a new key value, and your items re-encrypted under it.")
    var rotate = false

    @Option(help: ArgumentHelp("A local name for the new secret (default: the old one's, which moves to it).", valueName: "name"))
    var name: String?

    @Option(help: ArgumentHelp("Write the new holders' bundles into this directory instead of delivering them.", valueName: "dir"))
    var outDir: String?

    @OptionGroup var recovery: KeyRecoveryOptions

    @Option(help: ArgumentHelp("The secret's password layer, if it has one: read from the first line of this file.", valueName: "file"))
    var passwordFile: String?

    func run() async throws {
        let keystore = try home.openKeystore()
        let target = try recovery.relays.target(secret, keystore: keystore)
        let names = to.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard Set(names.map { $0.lowercased() }).count == names.count else { throw CLIError.invalidInput("--to names a holder twice") }
        let peers = try names.map { try keystore.peer(named: $0) }
        let addresses = outDir == nil ? try await recovery.reach.addresses(for: try keystore.peers(), discovering: peers) : [:]
        // A password file is read before the passphrase is asked for.
        let ask = try layerPasswordReadingFirst(file: passwordFile ?? recovery.keyPasswordFile, prompt: "Password for the secret: ")
        let identity = try keys.unlock(keystore)
        let localName = try name.map { try Label($0) }
        guard let old = target.own else {
            return try await reshareOntoNewMachine(target, keystore: keystore, identity: identity, peers: peers, name: localName,
                                                   addresses: addresses)
        }
        if rotate && old.header.type != .key { throw ValidationError("--rotate is for shared keys only") }

        let recoverer = recovery.recoverer(keystore, identity: identity)
        let gathered = try await recoverer.gatherPieces(of: old)
        ProgressLine.end()
        // The password is asked for once, by recovery, and kept for the new password layer.
        var password: SecureBytes?
        let askPassword: () throws -> SecureBytes = {
            let value = try ask()
            password = value
            return value
        }
        var request = ShareRequest(type: old.header.type, description: old.header.description, threshold: threshold,
                                   holders: peers.map { (label: $0.label, card: $0.card) }, replaces: old.header.secretID)

        let stored: StoredSecret
        if old.header.type == .key {
            let key = try recoverer.combineKey(old, pieces: gathered, password: askPassword)
            request.password = password
            request.keyID = rotate ? nil : old.header.keyID
            let value: SecureBytes
            if rotate {
                value = SecureBytes(count: SharedKey.length)
                value.withUnsafeMutableBytes { SecureRandom().fill($0) }
            } else {
                value = key
            }
            var source = SecureBytesSource(value)
            stored = try await distribute(request, content: &source, peers: peers, keystore: keystore, identity: identity, name: localName,
                                          outDir: outDir, addresses: addresses)
            if rotate { try reencryptItems(keystore: keystore, from: old.header.keyID!, oldKey: key, to: stored.header.keyID!, newKey: value) }
        } else {
            // Gathered pieces are files deleted when released: kept until the stream ends.
            let pieces = gathered.map(\.path)
            defer { withExtendedLifetime(gathered) {} }
            stored = try await reshareStream(request: request, keystore: keystore, identity: identity, peers: peers, name: localName,
                                             addresses: addresses, passwordUsed: { password }) { ready, output in
                _ = try SecretRecovery.recover(old, keystore: keystore, identity: identity, pieceFiles: pieces, password: askPassword,
                                               metadataReady: ready, output: output)
            }
        }
        // Without --name, the old name moves to the new secret; the old share stays, by its id.
        if localName == nil, old.name != nil { try keystore.moveName(from: old, to: stored) }
        Terminal.standardError("reshared \(old.header.type) \(old.header.secretIDHex.prefix(16)) as \(stored.header.secretIDHex.prefix(16)); "
            + "the old shares stay valid until their holders delete them")
    }

    /// Streams a secret of any size from recovery into the new shares through a pipe: a
    /// thread recovers into its write end, the dealer reads the other. Nothing is kept unless
    /// recovery ended well, so a failure part way cannot produce a truncated secret.
    private func reshareStream(request: ShareRequest, keystore: Keystore, identity: Identity, peers: [Peer], name: Label?,
                               addresses: [String: PeerAddress], passwordUsed: @escaping () -> SecureBytes?,
                               recover: @escaping (_ metadataReady: @escaping (SecretMetadata) throws -> Void,
                                                   _ output: @escaping (UnsafeRawBufferPointer) throws -> Void) throws -> Void) async throws -> StoredSecret {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw VaultError.fileSystem(path: "pipe", reason: String(cString: strerror(errno))) }
        let state = RecoveryThreadState()
        let writeEnd = fds[1]
        let thread = Thread {
            defer { close(writeEnd) }
            do {
                try recover({ state.metadataReady($0) }, { bytes in try writeAll(writeEnd, bytes) })
                state.finish(nil)
            } catch {
                state.finish(error)
            }
        }
        thread.start()
        let metadata = try state.waitForMetadata()
        var request = request
        request.metadata = metadata
        request.password = passwordUsed()
        var source = FileSource(fileDescriptor: fds[0], path: "the recovered secret")
        return try await distribute(request, content: &source, peers: peers, keystore: keystore, identity: identity, name: name,
                                    outDir: outDir, addresses: addresses) { try state.waitForEnd() }
    }

    /// A secret this identity holds no share of (its old machine is lost): recovered
    /// through relays from the holders `--from` names, with their approval, and shared
    /// again with this identity as its dealer. A key keeps its value and id, so its items
    /// still open.
    private func reshareOntoNewMachine(_ target: RecoveryTarget, keystore: Keystore, identity: Identity, peers: [Peer], name: Label?,
                                       addresses: [String: PeerAddress]) async throws {
        if rotate { throw ValidationError("--rotate needs a share of the key: recover onto this machine first") }
        let outcome = try await recovery.relays.recover(target, lanPieces: [], keystore: keystore, identity: identity, timeout: recovery.timeout)
        guard let header = outcome.header else { throw VaultError.tooFewPieces(have: 0, need: 0, missing: []) }
        var password: SecureBytes?
        let ask = layerPassword(file: passwordFile ?? recovery.keyPasswordFile, prompt: "Password for the secret: ")
        var request = ShareRequest(type: header.type, description: header.description, threshold: threshold,
                                   holders: peers.map { (label: $0.label, card: $0.card) }, replaces: header.secretID)
        request.keyID = header.keyID
        let pieces = outcome.pieces, replyKey = outcome.remote.replyKey
        let stored = try await reshareStream(request: request, keystore: keystore, identity: identity, peers: peers, name: name,
                                             addresses: addresses, passwordUsed: { password }) { ready, output in
            _ = try SecretRecovery.recover(header: header, keystore: keystore, identity: identity, pieceFiles: pieces, replyKeys: [replyKey],
                                           password: { let value = try ask(); password = value; return value },
                                           metadataReady: ready, output: output)
        }
        outcome.remote.end()
        Terminal.standardError("reshared \(header.type) \(header.secretIDHex.prefix(16)) as \(stored.header.secretIDHex.prefix(16)), "
            + "dealt by you; the old shares stay valid until their holders delete them")
    }

    /// Every local item under the old key, re-encrypted under the new one (then the old
    /// copy deleted).
    private func reencryptItems(keystore: Keystore, from oldID: [UInt8], oldKey: SecureBytes, to newID: [UInt8], newKey: SecureBytes) throws {
        let items = try keystore.items(keyID: oldID)
        for item in items {
            let header = item.header.copy(to: newID)
            _ = try keystore.copyItem(item, itemKey: SharedKey.itemKey(oldKey, headerHash: SharedKey.headerHash(item.header)),
                                      to: header, newItemKey: SharedKey.itemKey(newKey, headerHash: SharedKey.headerHash(header)))
            try keystore.removeItem(item)
        }
        if !items.isEmpty { Terminal.standardError("re-encrypted \(items.count) item\(items.count == 1 ? "" : "s") under the new key") }
    }
}

/// What the recovery thread of a streamed reshare reports to the dealer.
private final class RecoveryThreadState: @unchecked Sendable {
    private let condition = NSCondition()
    private var metadata: SecretMetadata?
    private var ended = false
    private var error: Error?

    func metadataReady(_ value: SecretMetadata) {
        condition.withLock {
            metadata = value
            condition.broadcast()
        }
    }

    func finish(_ failure: Error?) {
        condition.withLock {
            error = failure
            ended = true
            condition.broadcast()
        }
    }

    /// The recovered metadata, or the error that stopped recovery before it.
    func waitForMetadata() throws -> SecretMetadata {
        try condition.withLock {
            while metadata == nil && !ended { condition.wait() }
            if let metadata { return metadata }
            throw error ?? VaultError.corruptSecret("its header is incomplete")
        }
    }

    /// Waits for recovery to end, and rethrows its error.
    func waitForEnd() throws {
        try condition.withLock {
            while !ended { condition.wait() }
            if let error { throw error }
        }
    }
}
