import ArgumentParser
import Foundation
import VaultCore
import VaultNet

/// Asks every reachable holder at once for its piece; returns the pieces received, in
/// files sealed to us that disappear when released.
func gatherPieces(_ secret: StoredSecret, keystore: Keystore, identity: Identity, reach: PeerAddressOptions,
                  timeout: Int) async throws -> [OutputFile] {
    let header = secret.header
    let peers = try keystore.peers()
    let holders = peers.compactMap { peer -> (Peer, Int)? in
        guard let index = header.index(of: peer.card.agreementKey), index != header.holderIndex else { return nil }
        return (peer, index)
    }
    let addresses = try await reach.addresses(for: peers, discovering: holders.map(\.0), timeout: min(2, Double(timeout)))
    Terminal.standardError("need \(header.threshold - 1) piece\(header.threshold == 2 ? "" : "s") besides yours; "
        + "holders you trust: \(holders.isEmpty ? "none" : holders.map { "\($0.0.label) (index \($0.1))" }.joined(separator: ", "))")
    var reachable: [PieceGathering.Holder] = []
    for (peer, index) in holders {
        guard let address = addresses[peer.label.value] else {
            Terminal.standardError("  \(peer.label): not found nearby and no address known (use --peer \(peer.label)=HOST:PORT)")
            continue
        }
        Terminal.standardError("  asking \(peer.label) at \(address)")
        reachable.append(PieceGathering.Holder(peer: peer, index: index, address: address))
    }
    // Enough once k - 1 distinct holders' pieces check out; a stalled holder then costs
    // nothing, and a lying one only its own piece (recovery reports it).
    func checksOut(_ piece: OutputFile) -> Bool {
        do { return try SecretRecovery.check(piece: piece.path, of: secret, identity: identity) == nil } catch { return false }
    }
    var good = 0
    let enough = { (pieces: [OutputFile]) -> Bool in
        if checksOut(pieces[pieces.count - 1]) { good += 1 }
        return good >= header.threshold - 1
    }
    return await PieceGathering.gather(secret, from: reachable, identity: identity, directory: keystore.home.directory,
                                       timeout: timeout, enough: enough) { event in
        switch event {
        case .received(let peer): Terminal.standardError("  \(peer.label): piece received")
        case .failed(let peer, let error): Terminal.standardError("  \(peer.label): \(error)")
        case .timedOut: Terminal.standardError("  no more answers within \(timeout) s")
        case .enough(let waiting): Terminal.standardError("  enough pieces check out; not waiting for \(waiting) more")
        }
    }
}

/// Where a command that needs a shared key finds holders, when it must recover the key.
struct KeyRecoveryOptions: ParsableArguments {
    @OptionGroup var reach: PeerAddressOptions

    @Option(help: ArgumentHelp("Seconds to wait for holders when the key must be recovered.", valueName: "s"))
    var timeout: Int = 10

    @Option(help: ArgumentHelp("Read the shared key's password layer, if it has one, from the first line of this file.", valueName: "file"))
    var keyPasswordFile: String?
}

/// Recovers a shared key from this holder's share and pieces gathered from nearby holders,
/// into locked memory. The key is whole only in the returned buffer.
func recoverSharedKey(_ holding: KeyHolding, keystore: Keystore, identity: Identity, options: KeyRecoveryOptions) async throws -> SecureBytes {
    Terminal.standardError("recovering key '\(holding.displayName)' from its holders")
    let gathered = try await gatherPieces(holding.secret, keystore: keystore, identity: identity, reach: options.reach,
                                          timeout: options.timeout)
    return try recoverKeyValue(holding.secret, keystore: keystore, identity: identity, pieces: gathered,
                               password: layerPassword(file: options.keyPasswordFile, prompt: "Password for key '\(holding.displayName)': "))
}

/// Combines a key secret from this holder's share and `pieces` into a 32-byte buffer in
/// locked memory, reporting pieces set aside.
func recoverKeyValue(_ secret: StoredSecret, keystore: Keystore, identity: Identity, pieces: [OutputFile],
                     password: @escaping () throws -> SecureBytes) throws -> SecureBytes {
    let key = SecureBytes(count: SharedKey.length)
    var length = 0
    _ = try withExtendedLifetime(pieces) {
        try SecretRecovery.recover(
            secret, keystore: keystore, identity: identity, pieceFiles: pieces.map(\.path), password: password,
            verified: { piece in
                if let problem = piece.problem { Terminal.standardError("vault: warning: piece \(piece.index ?? 0) set aside, \(problem)") }
            },
            output: { bytes in
                guard length + bytes.count <= key.count else { throw VaultError.badKey }
                key.withUnsafeMutableBytes { ($0.baseAddress! + length).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
                length += bytes.count
            })
    }
    guard length == SharedKey.length else { throw VaultError.badKey }
    return key
}

/// How a command gets an item's key: from the agent when `vault serve` runs (a locked key
/// is then an error, so `vault lock` means what it says), else by recovering the shared key
/// for this one command and forgetting it afterwards.
struct KeyAccess {
    let keystore: Keystore
    let agent: AgentClient?

    static func open(_ keystore: Keystore) async -> KeyAccess {
        KeyAccess(keystore: keystore, agent: await AgentClient.connect(home: keystore.home))
    }

    /// The item key for `header`, whose shared key is `holding`.
    func itemKey(for header: ItemHeader, holding: KeyHolding, unlock: () throws -> Identity,
                 options: KeyRecoveryOptions) async throws -> SecureBytes {
        if let agent {
            guard let key = try await agent.itemKey(keyID: holding.keyID, headerHash: SharedKey.headerHash(header)) else {
                throw CLIError.unavailable("key '\(holding.displayName)' is locked",
                                           hint: "unlock it with 'vault unlock \(holding.displayName)'")
            }
            return key
        }
        let key = try await recoverSharedKey(holding, keystore: keystore, identity: try unlock(), options: options)
        return SharedKey.itemKey(key, headerHash: SharedKey.headerHash(header))
    }
}
