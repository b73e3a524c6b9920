import Foundation
import NIOCore
import NIOPosix
import VaultCore
import VaultHolders

/// The requesting side of the peer protocol.
public enum PeerClient {
    /// Connects to `peer` at `address` and checks that it proves the key trusted under its label.
    static func connect<T>(to peer: Peer, at address: PeerAddress, identity: Identity,
                           _ body: (SecureChannel) async throws -> T) async throws -> T {
        try await connectUnknown(at: address, identity: identity, expecting: (peer.card.agreementKey, peer.label.value)) { channel in
            guard channel.remoteKey == peer.card.agreementKey else { throw NetError.unexpectedPeer(expected: peer.label.value) }
            return try await body(channel)
        }
    }

    /// Connects to whoever answers at `address` (pairing), and waits for its welcome.
    static func connectUnknown<T>(at address: PeerAddress, identity: Identity, expecting: (key: [UInt8], label: String)? = nil,
                                  _ body: (SecureChannel) async throws -> T) async throws -> T {
        let connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        do {
            connection = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.seconds(5))
                .connect(host: address.host, port: Int(address.port)) { SecureChannel.configure($0) }
        } catch {
            throw NetError.unreachable("\(address): \(NetError.reason(of: error) ?? VaultError.words(for: error))")
        }
        do {
            return try await exchange(connection, identity: identity, expecting: expecting, body)
        } catch let error as NetError {
            throw error
        } catch let error as VaultError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // The transport failed under the exchange (a reset, a broken pipe): to the user,
            // the connection closed, whatever NIO calls it.
            throw NetError.closed
        }
    }

    private static func exchange<T>(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, identity: Identity,
                                    expecting: (key: [UInt8], label: String)?, _ body: (SecureChannel) async throws -> T) async throws -> T {
        try await SecureChannel.run(connection, initiator: true, identity: identity, expectedRemote: expecting) { channel in
            let (type, answer) = try await channel.receive()
            switch type {
            case .welcome: return try await body(channel)
            case .refused:
                let (code, reason) = Refusal.parse(answer) ?? (.malformed, "")
                throw NetError.refused(code, reason)
            default:
                throw NetError.protocolViolation("expected a welcome, got \(type)")
            }
        }
    }

    /// Delivers the bundle at `path` to its holder; returns when the holder has stored it.
    /// `progress` is advanced by every byte sent.
    public static func deliver(bundleAt path: String, to peer: Peer, at address: PeerAddress, identity: Identity,
                               progress: ProgressMeter? = nil) async throws {
        try await connect(to: peer, at: address, identity: identity) { channel in
            let file = try FileSource(path: path)
            let size = file.size ?? 0
            var source = MeteredSource(file, meter: progress)
            try await channel.send(.deliver, length: size, from: &source)
            let (type, body) = try await channel.receive()
            guard type == .deliverResult || type == .refused, let status = body.first else {
                throw NetError.protocolViolation("unexpected \(type) answer")
            }
            if status == 0 { return }
            let (code, reason) = Refusal.parse(body) ?? (.malformed, "")
            throw NetError.refused(code, reason)
        }
    }

    /// Offers `rule` to `peer`, a holder of its secret, over the LAN; returns where the
    /// holder's role stands (its person decides later, and answers through relays).
    public static func deliverRule(_ rule: EmergencyRule, to peer: Peer, at address: PeerAddress, identity: Identity) async throws -> String {
        try await connect(to: peer, at: address, identity: identity) { channel in
            try await channel.send(.emergencyRule, rule.encoded)
            let (type, body) = try await channel.receive()
            guard type == .deliverResult || type == .refused, let status = body.first else {
                throw NetError.protocolViolation("unexpected \(type) answer")
            }
            guard status == 0 else {
                let (code, reason) = Refusal.parse(body) ?? (.malformed, "")
                throw NetError.refused(code, reason)
            }
            let words = String(decoding: body.dropFirst(), as: UTF8.self)
            guard ["accepted", "declined", "waiting for consent", "off"].contains(words) else {
                throw NetError.protocolViolation("an unknown answer to an emergency rule")
            }
            return words
        }
    }

    /// Asks `peer`, holder `holderIndex` of `secret`, for its piece, proving possession of our
    /// own share on this channel. Writes the released piece to `output`.
    ///
    /// While the holder's person has not yet consented, `waiting` hears the request's id and
    /// the seconds left (once), and the request is made again, each time on a new channel
    /// with a new proof, until the holder answers or its time runs out.
    public static func requestPiece(of secret: StoredSecret, from peer: Peer, holderIndex: Int, at address: PeerAddress,
                                    identity: Identity, into output: OutputFile, progress: ProgressMeter? = nil,
                                    waiting: @Sendable (_ id: String, _ seconds: Int) -> Void = { _, _ in }) async throws {
        var deadline: Date?
        while true {
            guard let wait = try await requestPieceOnce(of: secret, from: peer, holderIndex: holderIndex, at: address, identity: identity,
                                                        into: output, progress: progress) else { return }
            if deadline == nil {
                // The holder's clock says when; ours bounds it, whatever the holder says: a
                // lying holder cannot keep us forever.
                let seconds = max(0, min(Int(NetLimits.approvalSeconds), Int(wait.until) - Int(VaultClock.seconds())))
                waiting(wait.request, seconds)
                deadline = Date().addingTimeInterval(NetLimits.approvalSeconds + 5)
            }
            guard let deadline, Date() < deadline else { throw NetError.notReleased(.timedOut) }
            try await Task.sleep(nanoseconds: UInt64(NetLimits.approvalPollSeconds * 1e9))
        }
    }

    /// One ask: nil once the piece is written; the holder's wait for its person otherwise.
    private static func requestPieceOnce(of secret: StoredSecret, from peer: Peer, holderIndex: Int, at address: PeerAddress,
                                         identity: Identity, into output: OutputFile, progress: ProgressMeter?) async throws -> ConsentWait? {
        try await connect(to: peer, at: address, identity: identity) { channel in
            let proof = try PossessionProof.make(for: secret, identity: identity, holder: holderIndex,
                                                 handshakeHash: channel.handshakeHash)
            let request = PieceRequest(secretID: secret.header.secretID, requester: secret.header.holderIndex,
                                       holder: holderIndex, proof: proof)
            try await channel.send(.pieceRequest, request.encoded)
            let (type, length) = try await channel.receiveHeader()
            switch type {
            case .piece:
                // A released piece of this secret has one possible length: anything else is
                // refused before a byte is written, so a holder cannot fill the disk.
                let expected = ReleasedPiece.length(for: secret.header)
                guard length == expected else {
                    throw NetError.protocolViolation("the piece is \(length) bytes long, not the \(expected) of a piece of this secret")
                }
                try await channel.receiveBody(length) {
                    try output.write($0)
                    progress?.advance($0.count)
                }
                return nil
            case .refused:
                var body: [UInt8] = []
                try await channel.receiveBody(length) { body += $0 }
                let (code, reason) = Refusal.parse(body) ?? (.malformed, "")
                throw NetError.refused(code, reason)
            case .pieceAnswer:
                var body: [UInt8] = []
                try await channel.receiveBody(length) { body += $0 }
                guard let code = body.first, let answer = try? PieceAnswer(code: code, fields: Array(body.dropFirst())) else {
                    throw NetError.protocolViolation("a malformed piece answer")
                }
                switch answer {
                case .waiting(let request?, let until): return ConsentWait(request: request, until: until)
                case .denied, .timedOut: throw NetError.notReleased(answer)
                case .refused(let refusal): throw NetError.refused(refusal, "")
                case .waiting, .released, .deniedByDealer, .emergencyWait:
                    // None of these is an answer over the LAN (a release is a piece message).
                    throw NetError.protocolViolation("an unexpected piece answer: \(answer)")
                }
            default:
                throw NetError.protocolViolation("unexpected \(type) answer")
            }
        }
    }

    /// A holder's "waiting for its person": the request's id there, and until when.
    private struct ConsentWait {
        let request: String
        let until: UInt64
    }
}
