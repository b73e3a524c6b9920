import Foundation
import VaultCore
import VaultHolders

/// Recovery from the holders of a secret: asks every reachable holder at once for its piece
/// over the peer protocol, and combines the pieces with this holder's own share.
///
/// The caller says how holders are reached (``resolve``) and hears what happens through
/// ``report``; nothing here prints.
public struct HolderRecovery: Sendable {
    /// What happened along the way, in order.
    public enum Event: Sendable {
        /// Recovery of the shared key with this name begins.
        case recoveringKey(String)
        /// `needed` pieces are wanted besides the own share; these trusted holders are asked.
        case needed(Int, holders: [(label: Label, index: Int)])
        /// No address is known for this holder, and discovery did not find it.
        case unreachable(Label)
        /// The holder is asked at this address.
        case asking(Label, PeerAddress)
        /// The pieces are on their way: one meter per holder asked, for a progress display.
        case transferring([ProgressMeter])
        /// What one holder answered, or that time ran out.
        case gathering(PieceGathering.Event)
        /// A piece failed its checks and was set aside; recovery goes on without it.
        case setAside(index: Int, problem: String)
    }

    /// Finds the address of each peer in the first list (a given or stored one), looking
    /// for those in the second list on the LAN as well; keyed by label.
    public typealias Resolve = @Sendable (_ peers: [Peer], _ discovering: [Peer], _ timeout: Double) async throws -> [String: PeerAddress]

    let keystore: Keystore
    let identity: Identity
    let resolve: Resolve
    let timeout: Int
    let strict: Bool
    let report: @Sendable (Event) -> Void

    /// Recovery as `identity`, waiting `timeout` seconds for holders; longer while a holder
    /// waits for its person's consent, unless `strict`.
    public init(keystore: Keystore, identity: Identity, timeout: Int, strict: Bool = false, resolve: @escaping Resolve,
                report: @escaping @Sendable (Event) -> Void) {
        self.keystore = keystore
        self.identity = identity
        self.timeout = timeout
        self.strict = strict
        self.resolve = resolve
        self.report = report
    }

    /// Asks every reachable holder of `secret` at once; returns the pieces received, in
    /// files (their key shares sealed to this identity) that disappear when released.
    public func gatherPieces(of secret: StoredSecret) async throws -> [OutputFile] {
        let header = secret.header
        let peers = try keystore.peers()
        let holders = peers.compactMap { peer -> (Peer, Int)? in
            guard let index = header.index(of: peer.card.agreementKey), index != header.holderIndex else { return nil }
            return (peer, index)
        }
        let addresses = try await resolve(peers, holders.map(\.0), min(2, Double(timeout)))
        report(.needed(header.threshold - 1, holders: holders.map { (label: $0.0.label, index: $0.1) }))
        var reachable: [PieceGathering.Holder] = []
        for (peer, index) in holders {
            guard let address = addresses[peer.label.value] else {
                report(.unreachable(peer.label))
                continue
            }
            report(.asking(peer.label, address))
            reachable.append(PieceGathering.Holder(peer: peer, index: index, address: address,
                                                   progress: ProgressMeter(peer.label.value, total: ReleasedPiece.length(for: header))))
        }
        if !reachable.isEmpty { report(.transferring(reachable.compactMap(\.progress))) }
        // Enough once k - 1 distinct holders' pieces check out; a stalled holder then costs
        // nothing, and a lying one only its own piece (recovery reports it).
        let identity = identity
        var good = 0
        let enough = { (pieces: [OutputFile]) -> Bool in
            let newest = pieces[pieces.count - 1].path
            if (try? SecretRecovery.check(piece: newest, of: header, identity: identity, holderIndex: header.holderIndex)) == .some(nil) { good += 1 }
            return good >= header.threshold - 1
        }
        let report = report
        return await PieceGathering.gather(secret, from: reachable, identity: identity, directory: keystore.home.directory,
                                           timeout: timeout, strict: strict, enough: enough) { report(.gathering($0)) }
    }

    /// Recovers the shared key `holding` from this holder's share and pieces gathered from
    /// its other holders, into locked memory. The key is whole only in the returned buffer.
    public func recoverSharedKey(_ holding: KeyHolding, password: @escaping () throws -> SecureBytes) async throws -> SecureBytes {
        report(.recoveringKey(holding.displayName))
        let gathered = try await gatherPieces(of: holding.secret)
        return try combineKey(holding.secret, pieces: gathered, password: password)
    }

    /// Combines a key secret from this holder's share and `pieces` into a 32-byte buffer in
    /// locked memory, reporting pieces set aside.
    public func combineKey(_ secret: StoredSecret, pieces: [OutputFile], password: @escaping () throws -> SecureBytes) throws -> SecureBytes {
        try withExtendedLifetime(pieces) {
            try combineKey(secret, pieceFiles: pieces.map(\.path), replyKeys: [], password: password)
        }
    }

    /// Combines a key secret from this holder's share and the released pieces in
    /// `pieceFiles` (some sealed to `replyKeys`, when they came through relays).
    public func combineKey(_ secret: StoredSecret, pieceFiles: [String], replyKeys: [ReplyKey],
                           password: @escaping () throws -> SecureBytes) throws -> SecureBytes {
        let key = SecureBytes(count: SharedKey.length)
        var length = 0
        let report = report
        _ = try SecretRecovery.recover(
            secret, keystore: keystore, identity: identity, pieceFiles: pieceFiles, replyKeys: replyKeys, password: password,
            verified: { piece in
                if let problem = piece.problem { report(.setAside(index: piece.index ?? 0, problem: problem)) }
            },
            output: { bytes in
                // A key secret is exactly 32 bytes; anything longer is not a key.
                guard length + bytes.count <= key.count else { throw VaultError.badKey }
                key.withUnsafeMutableBytes { ($0.baseAddress! + length).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
                length += bytes.count
            })
        guard length == SharedKey.length else { throw VaultError.badKey }
        return key
    }
}
