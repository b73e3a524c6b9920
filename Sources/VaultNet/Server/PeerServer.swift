import Foundation
import NIOCore
import NIOPosix
import VaultCore
import VaultHolders

/// `vault serve`'s listener: share delivery from trusted peers and piece requests.
public final class PeerServer: @unchecked Sendable {
    /// What the server does with an incoming share when confirmation is on.
    public typealias Confirm = @Sendable (_ question: String) -> Bool

    private let keystore: Keystore
    private let identity: Identity
    private let confirm: Confirm?
    private let log: @Sendable (String) -> Void
    private let limiter = RateLimiter(burst: NetLimits.pieceRequestsPerMinute, perSecond: Double(NetLimits.pieceRequestsPerMinute) / 60, maximumKeys: 4096)
    /// How long pairing stays open once the server listens (nil: no pairing).
    private let pairingWindow: TimeInterval?
    /// When the server began to listen; guarded by `pairingLock`.
    private var pairingOpened: Date?
    private let pairingConfirm: Pairing.Confirm?
    private let slots = ConnectionSlots()
    private let throttled: LogThrottle
    private let approvals: ReleaseApprovals
    /// Hears of each emergency role offered over the LAN, which waits in the consent queue.
    private let announce: @Sendable (HolderRequest) -> Void
    /// Pairing attempts, all keys together: each is a prompt on a person's screen, and each
    /// is one more draw for a man in the middle hoping two codes match.
    private let pairingLimiter = RateLimiter(burst: NetLimits.pairingAttemptsPerMinute, perSecond: Double(NetLimits.pairingAttemptsPerMinute) / 60, maximumKeys: 4096)
    /// One pairing at a time: two prompts at once could be confused for each other.
    private var pairingInProgress = false
    private let pairingLock = NSLock()

    /// A server for `identity`, storing into `keystore`. With `confirm`, each incoming share
    /// is put to it first; it answers no when nobody can be asked.
    /// With `pairing`, untrusted keys may pair until the window closes (at most 5 minutes),
    /// each pairing put to `pairing.confirm`.
    /// A piece is released only with the person's consent through `approvals`, unless they
    /// opted in to automatic release for that peer (``Keystore/setAutoRelease(_:secretID:peer:)``).
    public init(keystore: Keystore, identity: Identity, confirm: Confirm?,
                pairing: (window: TimeInterval, confirm: Pairing.Confirm)? = nil, approvals: ReleaseApprovals = ReleaseApprovals(),
                announce: @escaping @Sendable (HolderRequest) -> Void = { _ in }, log: @escaping @Sendable (String) -> Void) {
        self.approvals = approvals
        self.announce = announce
        self.keystore = keystore
        self.identity = identity
        self.confirm = confirm
        self.log = log
        throttled = LogThrottle(log: log)
        pairingWindow = pairing.map { min($0.window, NetLimits.maximumPairingWindow) }
        pairingConfirm = pairing?.confirm
    }

    /// When the pairing window closes; nil without pairing or before the server listens.
    private var pairingUntil: Date? {
        guard let pairingWindow, let opened = pairingLock.withLock({ pairingOpened }) else { return nil }
        return opened.addingTimeInterval(pairingWindow)
    }

    /// Binds and serves until the task is cancelled. `ready` receives the bound port.
    public func run(host: String, port: Int, ready: @Sendable (Int) -> Void = { _ in }) async throws {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: host, port: port, childChannelInitializer: SecureChannel.accepted)
        // The window opens when the server listens, as `vault serve` announces it: not when
        // it was configured, however long binding took.
        pairingLock.withLock { pairingOpened = Date() }
        ready(server.channel.localAddress?.port ?? port)
        try await AcceptLoop.run(server) { channel in
            let (ticket, evicted) = self.slots.admit(channel)
            let from = channel.remoteAddress?.description ?? "?"
            if evicted {
                self.throttled.note("evicted", "closed the oldest of \(NetLimits.handshakingConnections) connections still in their handshake, to admit a new one")
            }
            return {
                do {
                    try await self.handle(try await SecureChannel.adopt(channel), ticket: ticket)
                    self.slots.release(ticket)
                } catch {
                    channel.close(promise: nil)  // closed already, unless it could not be adopted
                    if self.slots.release(ticket) {
                        self.log("connection from \(from) ended: \(NetError.words(for: error))")
                    } else {
                        self.throttled.note("handshake", "connection from \(from) ended before its handshake completed: \(NetError.words(for: error))")
                    }
                }
            }
        }
    }

    private func handle(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, ticket: UInt64) async throws {
        try await SecureChannel.run(connection, initiator: false, identity: identity) { channel in
            guard slots.establish(ticket) else {
                throttled.note("busy", "refused a connection: \(NetLimits.establishedConnections) established connections are open")
                return try await channel.refuse(.busy)
            }
            guard let peer = try keystore.peers().first(where: { $0.card.agreementKey == channel.remoteKey }) else {
                if let pairingUntil, let pairingConfirm, Date() < pairingUntil {
                    guard pairingLimiter.allow([]) else {
                        throttled.note("pairing-rate", "refused a pairing attempt: more than \(NetLimits.pairingAttemptsPerMinute) this minute")
                        return try await channel.refuse(.rateLimited)
                    }
                    let claimed = pairingLock.withLock { () -> Bool in
                        defer { pairingInProgress = true }
                        return !pairingInProgress
                    }
                    guard claimed else { return try await channel.refuse(.busy, "another pairing is in progress") }
                    defer { pairingLock.withLock { pairingInProgress = false } }
                    return try await pair(on: channel, confirm: pairingConfirm)
                }
                throttled.note("untrusted", "refused an untrusted key from \(connection.channel.remoteAddress?.description ?? "?")")
                try await channel.refuse(.untrusted)
                return
            }
            // The server speaks first: a client never writes into a connection that is about
            // to be refused, whose reset could swallow the refusal.
            try await channel.send(.welcome, [])
            let (type, length) = try await channel.receiveHeader()
            switch type {
            case .deliver: try await receiveShare(from: peer, length: length, on: channel)
            case .pieceRequest: try await answerPieceRequest(from: peer, length: length, on: channel)
            case .emergencyRule: try await receiveRule(from: peer, length: length, on: channel)
            default:
                try await channel.refuse(.malformed, "unexpected \(type) message")
            }
        }
    }

    /// An untrusted key during the pairing window: only a pairing may follow.
    private func pair(on channel: SecureChannel, confirm: @escaping Pairing.Confirm) async throws {
        try await channel.send(.welcome, [])
        let (type, body) = try await channel.receive()
        guard type == .pairCard else {
            log("refused an untrusted key: it did not ask to pair")
            return try await channel.refuse(.untrusted)
        }
        let hash = channel.handshakeHash
        let (card, label, commitment) = try Pairing.parseCard(body, remoteKey: channel.remoteKey, handshakeHash: hash)
        do {
            try keystore.checkNewPeer(card, label: label)
        } catch {
            log("refused to pair with '\(TerminalText.escaped(label.value))': \(NetError.words(for: error))")
            // The reason stays in this log: an unauthenticated client must not learn which
            // keys and labels this machine trusts.
            return try await channel.refuse(.pairingDeclined, "declined by the server")
        }
        // Our nonce goes out only after the client's commitment arrived, and the code is
        // shown only after the client revealed a nonce matching it.
        let nonce = SecureRandom().bytes(Pairing.nonceLength)
        try await channel.send(.pairCard, Pairing.cardMessage(identity, handshakeHash: hash, value: nonce))
        let (revealType, revealed) = try await channel.receive()
        guard revealType == .pairReveal, revealed.count == Pairing.nonceLength,
              Pairing.commitment(handshakeHash: hash, nonce: revealed) == commitment else {
            log("refused to pair with '\(TerminalText.escaped(label.value))': its nonce does not match its commitment (a man in the middle?)")
            return try await channel.refuse(.pairingDeclined, "the revealed nonce does not match the commitment")
        }
        let mine = await Pairing.ask(confirm, Pairing.code(handshakeHash: hash, clientNonce: revealed, serverNonce: nonce), card, label)
        let (answerType, answer) = try await channel.receive()
        guard answerType == .pairDecision, answer.count == 1 else { throw NetError.protocolViolation("expected a pairing decision") }
        try await channel.send(.pairDecision, [mine ? 1 : 0])
        guard mine, answer[0] == 1 else {
            return log("did not pair with '\(label)': \(mine ? "the other side" : "this side") declined")
        }
        try keystore.addPeer(card, label: label, address: nil)
        log("paired with '\(label)' (fingerprint \(card.fingerprint))")
    }

    private func receiveShare(from peer: Peer, length: UInt64, on channel: SecureChannel) async throws {
        func answer(_ code: Refusal?, _ text: String) async throws {
            try await channel.send(.deliverResult, [code?.rawValue ?? 0] + Array(text.utf8.prefix(512)))
        }
        // Nothing reaches the disk before the signed header names this peer as the dealer and
        // gives the announced length exactly: a trusted peer must not fill it with 2^40 bytes.
        // A refusal mid-body ends the connection: the rest of the body is never read.
        var prefix = IncomingBundle()
        var incoming: OutputFile?
        var header: BundleHeader?
        // This holder's own failure to store (a full disk): the rest of the body, whose length
        // is already bounded, is read and dropped so that the sender hears why instead of a
        // reset connection.
        var storeFailure: VaultError?
        func store(_ write: () throws -> Void) throws {
            do { try write() } catch let error as VaultError { storeFailure = error }
        }
        do {
            try await channel.receiveBody(length) { chunk in
                if storeFailure != nil { return }
                if let incoming { return try store { try incoming.write(chunk) } }
                let parsed: (header: BundleHeader, length: UInt64, bytes: [UInt8])?
                do { parsed = try prefix.take(chunk) } catch let error as VaultError { throw DeliveryRefusal(error.description) }
                guard let parsed else { return }
                guard parsed.header.dealer == peer.card else { throw DeliveryRefusal("only a bundle's dealer may deliver it") }
                guard parsed.length == length else {
                    throw DeliveryRefusal("the bundle is \(length) bytes long, but its header says \(parsed.length)")
                }
                // The bundle is sealed to this identity; it is kept at 0600 and removed afterwards.
                try store {
                    let file = try keystore.newBundleFile()
                    try parsed.bytes.withUnsafeBytes { try file.write($0) }
                    (incoming, header) = (file, parsed.header)
                }
            }
        } catch let refusal as DeliveryRefusal {
            log("refused a share from '\(peer.label)': \(refusal.reason)")
            return try await answer(.rejectedBundle, refusal.reason)
        }
        if let storeFailure {
            log("could not store a share from '\(peer.label)': \(storeFailure)")
            // The sender learns the system's reason, not this machine's paths.
            guard case .fileSystem(_, let reason) = storeFailure else { return try await answer(.storage, "") }
            return try await answer(.storage, reason)
        }
        guard let incoming, let header else {
            log("refused a share from '\(peer.label)': it is truncated")
            return try await answer(.rejectedBundle, VaultError.truncated(what: "the share bundle").description)
        }
        do {
            // Delivery is idempotent. A sender whose acknowledgement was lost (this server
            // killed after its commit, the connection cut) delivers again; an equal signed
            // header names the very share already stored, so it is acknowledged, not refused.
            if try keystore.secrets().contains(where: { $0.header == header }) {
                log("share \(header.holderIndex) of \(header.secretIDHex.prefix(16)) from '\(peer.label)' is already stored")
                return try await answer(nil, "stored")
            }
            if let confirm {
                let question = "Store a share of \(header.type) \(header.secretIDHex.prefix(16)) from '\(peer.label)' (\(TerminalText.escaped(header.description)))?"
                guard confirm(question) else {
                    log("did not store a share from '\(peer.label)': not confirmed")
                    return try await answer(.notConfirmed, "")
                }
            }
            let stored = try keystore.storeDeliveredBundle(at: incoming.path, identity: identity)
            log("stored share \(stored.header.holderIndex) of \(stored.header.secretIDHex.prefix(16)) from '\(peer.label)'")
            try await answer(nil, "stored")
        } catch let error as VaultError {
            log("refused a share from '\(peer.label)': \(error)")
            // A failure of this holder's own keystore is no fault of the bundle.
            if case .storage(let message) = error { return try await answer(.storage, message) }
            try await answer(.rejectedBundle, error.description)
        }
    }

    /// A dealer's emergency rule, over the LAN as its share came: checked as one through
    /// relays is (only its dealer delivers it), and its role put to the person through the
    /// consent queue. The answer says where the role stands: "waiting for consent",
    /// "accepted", "declined" or "off"; the person's decision goes back through relays.
    private func receiveRule(from peer: Peer, length: UInt64, on channel: SecureChannel) async throws {
        var body: [UInt8] = []
        guard length == PeerMessageType.emergencyRule.maximumBody else { throw NetError.protocolViolation("an emergency rule of \(length) bytes") }
        try await channel.receiveBody(length) { body += $0 }
        func answer(_ code: Refusal?, _ text: String) async throws {
            try await channel.send(.deliverResult, [code?.rawValue ?? 0] + Array(text.utf8.prefix(512)))
        }
        let rule: EmergencyRule
        do {
            rule = try EmergencyRule(parsing: body)
        } catch {
            log("refused an emergency rule from '\(peer.label)': \(error)")
            return try await answer(.rejectedRule, error.description)
        }
        switch try EmergencyDesk.take(rule: rule, from: peer.card, groupID: [], keystore: keystore) {
        case .queued(let request):
            announce(request)
            try await answer(nil, "waiting for consent")
        case .taken(let state), .known(let state?):
            log("took the emergency rule of \(rule.secretID.hex.prefix(16)) from '\(peer.label)' (\(Self.words(state)))")
            try await answer(nil, Self.words(state))
        case .known(nil):
            try await answer(nil, "waiting for consent")
        case .refused(let reason):
            log("refused an emergency rule from '\(peer.label)': \(reason)")
            try await answer(.rejectedRule, reason)
        }
    }

    /// A role's state as a `deliverResult` says it (Docs/PROTOCOL.md §3).
    static func words(_ state: HolderRecord.RoleState) -> String {
        switch state {
        case .accepted: "accepted"
        case .declined: "declined"
        case .waiting: "waiting for consent"
        case .off: "off"
        }
    }

    private func answerPieceRequest(from peer: Peer, length: UInt64, on channel: SecureChannel) async throws {
        var body: [UInt8] = []
        guard length <= PeerMessageType.pieceRequest.maximumBody else { throw NetError.protocolViolation("oversized request") }
        try await channel.receiveBody(length) { body += $0 }
        guard let request = PieceRequest(body) else { return try await channel.refuse(.malformed) }
        // Release only when every condition holds: trusted (checked), under the rate limit,
        // a share of that secret, another index, the peer is that holder, and the proof
        // verifies on this very channel.
        // Asking again about a request that waits for consent is polling, not a new request.
        let open = approvals.isOpen(peerKey: peer.card.agreementKey, secretID: request.secretID)
        guard open || limiter.allow(peer.card.agreementKey) else {
            throttled.note("rate", "rate limited piece requests from '\(peer.label)'")
            return try await channel.refuse(.rateLimited)
        }
        // Two dealers may have used one secret id (shares are kept by dealer and id); the
        // one whose proof of possession verifies on this channel is the one asked for.
        let candidates = try keystore.secrets().filter { $0.header.secretID == request.secretID }
        let proven = candidates.first {
            $0.header.index(of: peer.card.agreementKey) == request.requester
                && PossessionProof.verify(request.proof, header: $0.header, requester: request.requester, handshakeHash: channel.handshakeHash)
        }
        guard let secret = proven ?? candidates.first else {
            return try await channel.refuse(.unknownSecret)
        }
        let header = secret.header
        guard request.holder == header.holderIndex else { return try await channel.refuse(.malformed, "wrong holder index") }
        guard request.requester != header.holderIndex else { return try await channel.refuse(.sameIndex) }
        guard header.index(of: peer.card.agreementKey) == request.requester,
              PossessionProof.verify(request.proof, header: header, requester: request.requester, handshakeHash: channel.handshakeHash) else {
            log("refused a piece request from '\(peer.label)': bad proof of possession")
            return try await channel.refuse(.badProof)
        }
        // Consent: a thief running this machine's serve must not collect pieces unattended,
        // so a person approves each release unless they opted in for this peer.
        let piece = "piece \(header.holderIndex) of \(header.type) \(header.secretIDHex.prefix(16))"
        let decision: ReleaseDecision
        if try keystore.releasesAutomatically(secretID: header.secretID, to: peer.card) {
            decision = .automatic
        } else {
            switch approvals.stand(peer: peer, header: header, requester: request.requester) {
            case .waiting(let id, let seconds, _):
                // The request's id and its time are fields: the requester reads them as such.
                return try await channel.answer(.waiting(request: id, until: VaultClock.seconds() + UInt64(max(0, seconds))))
            case .denied:
                try keystore.recordRelease(secretID: header.secretID, peer: peer, requester: request.requester, decision: .denied)
                log("did not release \(piece) to '\(peer.label)': denied")
                return try await channel.answer(.denied)
            case .timedOut:
                try keystore.recordRelease(secretID: header.secretID, peer: peer, requester: request.requester, decision: .timedOut)
                log("did not release \(piece) to '\(peer.label)': nobody approved in time")
                return try await channel.answer(.timedOut)
            case .busy:
                throttled.note("consent-busy", "turned away a piece request: \(NetLimits.pendingApprovals) already wait for consent")
                return try await channel.refuse(.busy, "too many requests wait for consent")
            case .approved:
                decision = .approved
            }
        }
        let released = try keystore.home.transientFile("vpiece")
        try keystore.release(secret, to: peer, index: request.requester, sealedTo: peer.card.agreementKey, decision: decision,
                             identity: identity, output: released)
        var source = try FileSource(path: released.path)
        try await channel.send(.piece, length: source.size ?? 0, from: &source)
        log("released \(piece) to '\(peer.label)' (\(decision == .automatic ? "automatic release" : "approved"))")
    }
}

/// Why a delivery is refused before its body is stored.
private struct DeliveryRefusal: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}
