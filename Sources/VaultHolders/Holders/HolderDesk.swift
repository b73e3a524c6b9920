import VaultCore
import Foundation

/// A holder's side of the holder protocol through relays (Docs/PROTOCOL.md §9): what it
/// makes of a piece request or a share offer that arrived, and what it answers once its
/// person decided. The network is the caller's; nothing here sends.
///
/// A request passes every check a LAN request passes, on what it carries instead of a Noise
/// channel (``RelayPieceRequest``), then waits in the one consent queue, unless its
/// requester holds a share and the person opted in to automatic release for it. A request
/// from someone who holds no share is never released without asking.
public enum HolderDesk {
    /// What became of a request or an offer.
    public enum Intake: Sendable {
        /// A check refused it: answer so, at once.
        case refused(Refusal)
        /// A share offer that this holder would not keep (the words say why): answer
        /// "refused", naming the secret and the share as the bundle does (zeros and 1 when it
        /// does not parse).
        case refusedShare(String, secretID: [UInt8], holder: Int)
        /// It waits for the person (and its requester is told it waits).
        case queued(HolderRequest)
        /// Released without asking (automatic release): answer with the piece now.
        case automatic(HolderRequest)
        /// An emergency request from the trustee of a rule this holder took: its wait runs
        /// (answer when it releases; tell the requester and the dealer now), or a decision of
        /// the dealer's that came first settled it.
        case emergency(HolderRequest)
        /// A second offer in one message id: nothing to do.
        case duplicate
    }

    /// Takes a piece request that came from `sender` through `group`.
    public static func take(_ request: RelayPieceRequest, from sender: KeyCard, in group: GroupRecord, keystore: Keystore,
                            identity: Identity, now: Date = VaultClock.now()) throws(VaultError) -> Intake {
        let clock = UInt64(now.timeIntervalSince1970)
        // Each check in turn, and the requester told which one failed.
        guard sender == request.requesterCard else { return .refused(.redirected) }
        guard group.members.contains(where: { $0.card == request.requesterCard }) else { return .refused(.notAMember) }
        guard let peer = try keystore.peers().first(where: { $0.card == request.requesterCard }) else { return .refused(.untrusted) }
        guard request.holder == identity.card else { return .refused(.otherHolder) }
        guard clock < request.expires, request.created <= clock + RelayPieceRequest.clockSkew else { return .refused(.expired) }
        let row = BundleHeader.rowID(dealer: request.dealer, secretID: request.secretID)
        guard let secret = try keystore.secrets().first(where: { $0.header.rowID == row }) else { return .refused(.unknownSecret) }
        let header = secret.header
        let claimed = header.index(of: request.requesterCard.agreementKey)
        if request.holdsNoShare {
            // A holder asks with its proof; one that does not is not who it claims to be.
            guard claimed == nil else { return .refused(.badProof) }
        } else {
            guard request.requester != header.holderIndex, claimed == request.requester, request.provesPossession(of: header) else {
                return .refused(.badProof)
            }
        }
        // The trustee of a rule this holder took waits out the rule's wait instead of a
        // person's yes; only this secret's rule counts, and only for the card it names.
        // Not through the guest box: the dealer's denial travels through a group the holder
        // shares with it, and one shared with nobody could never stop the wait. There the
        // trustee is asked about as anyone holding no share is: the person decides.
        if !group.isGuestBox, let held = try keystore.emergencyRule(secretRow: row), held.role == .accepted,
           held.rule.trustee == request.requesterCard {
            switch try EmergencyDesk.waitFor(request, peer: peer, rule: held.rule, group: group, keystore: keystore, now: now) {
            case .added(let taken): return .emergency(taken)
            case .replayed: return .refused(.replayed)
            case .busy: return .refused(.busy)
            }
        }
        let optedIn = try keystore.releasesAutomatically(secretID: header.secretID, to: peer.card)
        let automatic = !request.holdsNoShare && optedIn
        switch try keystore.addHolderRequest(nonce: request.nonce, kind: .piece, groupID: group.id, peer: peer, secretRow: row,
                                             record: request.encoded(), state: automatic ? .automatic : .waiting,
                                             expires: request.expires, now: now) {
        case .added(let taken): return automatic ? .automatic(taken) : .queued(taken)
        // Its nonce is known. Other relays' copies of one message were set aside by its id
        // before this, so this is the request again in another message: a replay.
        case .replayed: return .refused(.replayed)
        case .busy: return .refused(.busy)
        }
    }

    /// Takes a share offer, its bundle in the file at `path` (which moves into the keystore's
    /// offers folder when queued, and is removed otherwise), from `sender` through `group`.
    /// An offer waits for the person as `vault secrets import` asks: nothing is kept before.
    public static func take(offer path: String, messageID: [UInt8], from sender: KeyCard, in group: GroupRecord, expires: UInt64,
                            keystore: Keystore, identity: Identity, now: Date = VaultClock.now()) throws -> Intake {
        var keep = false
        defer { if !keep { unlink(path) } }
        let named = (try? BundleHeader(bundleAt: path)).map { ($0.secretID, $0.holderIndex) } ?? ([UInt8](repeating: 0, count: 16), 1)
        func refused(_ reason: String) -> Intake { .refusedShare(reason, secretID: named.0, holder: named.1) }
        let header: BundleHeader
        do {
            header = try keystore.bundleHeaders([path], identity: identity)[0]
        } catch {
            if case .storage = error { throw error }
            return refused(error.description)
        }
        // Only its own dealer delivers a share: whoever else passes one on is refused.
        guard header.dealer == sender else { return refused("it was sent by someone other than its dealer") }
        guard let peer = try keystore.peers().first(where: { $0.card == sender }) else { return refused("its dealer is not trusted") }
        guard try !keystore.hasHolderRequest(nonce: messageID) else { return .duplicate }
        let offers = keystore.home.directory + "/offers"
        if mkdir(offers, 0o700) != 0 && errno != EEXIST { throw VaultError.fileSystem(path: offers, errno: errno) }
        let kept = offers + "/" + messageID.hex + ".vshare"
        guard rename(path, kept) == 0 else { throw VaultError.fileSystem(path: offers, errno: errno) }
        // An offer waits at most as long as a request may (its relay copy may claim longer).
        let until = min(expires, UInt64(now.timeIntervalSince1970) + RelayPieceRequest.maximumLifetime)
        switch try keystore.addHolderRequest(nonce: messageID, kind: .share, groupID: group.id, peer: peer, secretRow: header.rowID,
                                             record: Array(kept.utf8), expires: until, now: now) {
        case .added(let taken):
            keep = true
            return .queued(taken)
        case .replayed:
            unlink(kept)
            keep = true
            return .duplicate
        case .busy:
            unlink(kept)
            keep = true
            return refused("too many requests and offers from its dealer wait here")
        }
    }

    /// What to answer for a request decided (approved, automatic, denied) or lapsed
    /// (expired), written through `emit` as a holder record: for a release, the piece goes
    /// out sealed to the request's reply key, and the release log records it. A share offer
    /// approved is stored now. Afterwards the caller sends it and marks it answered.
    public static func answer(_ request: HolderRequest, keystore: Keystore, identity: Identity,
                              emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        let peer = try keystore.peers().first { $0.card.agreementKey == request.peerKey }
        switch request.kind {
        case .piece:
            guard let asked = request.pieceRequest else { throw VaultError.keystoreCorrupt("a stored piece request does not parse") }
            let secret = try keystore.secrets().first { $0.header.rowID == request.secretRow ?? [] }
            let outcome: PieceAnswer
            switch request.state {
            case .approved, .automatic:
                guard let secret, let peer else {
                    return try emitAll(HolderRecord.pieceAnswer(nonce: asked.nonce, outcome: .refused(secret == nil ? .unknownSecret : .untrusted)), emit)
                }
                let released = try keystore.home.transientFile("vpiece")
                defer { unlink(released.path) }
                let decision: ReleaseDecision = switch request.emergency {
                case .approved?: .approvedByDealer
                case .some: .emergency
                case nil: request.state == .automatic ? .automatic : .approved
                }
                try keystore.release(secret, to: peer, index: asked.requester, sealedTo: asked.replyKey, decision: decision,
                                     identity: identity, output: released)
                try emitAll(HolderRecord.pieceAnswer(nonce: asked.nonce, outcome: .released, prefix: secret.prefix), emit)
                var source = try FileSource(path: released.path)
                try source.forEachChunk(emit)
                return
            case .denied: outcome = request.emergency == .cancelled ? .deniedByDealer : .denied
            case .expired: outcome = .timedOut
            case .waiting:
                outcome = request.releaseAt.map { .emergencyWait(until: UInt64($0.timeIntervalSince1970)) }
                    ?? .waiting(request: request.id, until: UInt64(request.expires.timeIntervalSince1970))
            case .answered: return
            }
            if let secret, let peer, request.state != .waiting {
                let decision: ReleaseDecision = switch outcome {
                case .deniedByDealer: .deniedByDealer
                case .denied: .denied
                default: .timedOut
                }
                try keystore.recordRelease(secretID: secret.header.secretID, peer: peer, requester: asked.requester, decision: decision)
            }
            try emitAll(HolderRecord.pieceAnswer(nonce: asked.nonce, outcome: outcome), emit)
        case .share:
            guard let path = request.bundlePath else { return }
            var state = HolderRecord.ShareState.refused
            var secretID: [UInt8] = [], index = 0
            if let header = try? BundleHeader(bundleAt: path) { (secretID, index) = (header.secretID, header.holderIndex) }
            switch request.state {
            case .approved, .automatic:
                // Kept already (an answer that could not be written the first time): stored.
                let stored = try keystore.secrets().contains { $0.header.rowID == request.secretRow ?? [] }
                let held = stored && !FileManager.default.fileExists(atPath: path)
                state = held ? .stored : try storeOffered(path, keystore: keystore, identity: identity)
            case .waiting:
                state = .waiting
            case .denied, .expired, .answered:
                unlink(path)
            }
            try emitAll(HolderRecord.shareAnswer(secretID: secretID, holder: max(index, 1), state: state), emit)
        case .role:
            guard let rule = request.rule else { return }
            let state: HolderRecord.RoleState
            switch request.state {
            case .approved, .automatic: state = .accepted
            case .denied, .expired: state = .declined
            case .waiting: state = .waiting
            case .answered: return
            }
            // Recorded once: an answer written again after a failed send finds it decided.
            if state != .waiting, try keystore.decideRole(rule, accept: state == .accepted) {
                try keystore.recordRelease(secretID: rule.secretID, peerKey: rule.trustee.agreementKey,
                                           peerLabel: try EmergencyDesk.label(of: rule.trustee, keystore: keystore), requester: 0,
                                           decision: state == .accepted ? .roleAccepted : .roleDeclined,
                                           detail: "a wait of \(DurationText.text(rule.wait))")
            }
            try emitAll(HolderRecord.roleAnswer(secretID: rule.secretID, issued: rule.issued, state: state), emit)
        }
    }

    /// An answer to a request refused on a check, before it was queued.
    public static func refusal(nonce: [UInt8], _ refusal: Refusal, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        try emitAll(HolderRecord.pieceAnswer(nonce: nonce, outcome: .refused(refusal)), emit)
    }

    /// A share offer refused: the dealer learns it.
    public static func shareRefused(secretID: [UInt8], holder: Int, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        try emitAll(HolderRecord.shareAnswer(secretID: secretID, holder: max(holder, 1), state: .refused), emit)
    }

    /// Stores an offered bundle once its person approved; a share held already (the same
    /// offer through another group) counts as stored.
    private static func storeOffered(_ path: String, keystore: Keystore, identity: Identity) throws -> HolderRecord.ShareState {
        do {
            _ = try keystore.storeDeliveredBundle(at: path, identity: identity)
        } catch {
            guard case .duplicateSecret = error else { throw error }
        }
        return .stored
    }

    private static func emitAll(_ bytes: [UInt8], _ emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        try bytes.withUnsafeBytes(emit)
    }
}
