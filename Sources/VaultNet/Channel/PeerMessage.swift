import VaultCore
import VaultHolders
import VaultHolders

/// The peer protocol's messages (Docs/PROTOCOL.md). Each travels as
/// version (1) ‖ type (1) ‖ body length (8) ‖ body, split over as many Noise transport
/// messages as it needs; a Noise message never carries the end of one message and the start
/// of the next.
public enum PeerMessageType: UInt8, Sendable {
    /// A share bundle from its dealer, streamed.
    case deliver = 1
    /// The answer to `deliver`: a status byte (0 stored, else a refusal code) and a reason.
    case deliverResult = 2
    /// A request for the holder's piece, with a proof of possession.
    case pieceRequest = 3
    /// A released piece for the requester, streamed.
    case piece = 4
    /// A refusal: code (1) ‖ UTF-8 reason.
    case refused = 5
    /// The server's first message when it trusts the client, or will pair with it: empty.
    case welcome = 6
    /// Pairing, client first then server: its card (65) ‖ its signature over the handshake
    /// hash (64) ‖ a value (32: the client's commitment, the server's nonce) ‖ its label.
    case pairCard = 7
    /// Pairing, client first then server: 1 if its person confirmed the code, else 0.
    case pairDecision = 8
    /// Pairing, client: the nonce it committed to in its card message (32).
    case pairReveal = 9
    /// A dealer's emergency rule for a secret the holder holds (FORMAT.md §21), answered
    /// with `deliverResult`.
    case emergencyRule = 10
    /// A holder's answer to a piece request that released nothing (yet): a ``PieceAnswer``
    /// (FORMAT.md §20's encoding), its fields as fields (a request id, a time), since
    /// protocol version 2. A release is a `piece`; a check's refusal a `refused`.
    case pieceAnswer = 11

    /// The largest body accepted for this type.
    var maximumBody: UInt64 {
        switch self {
        case .deliver, .piece: NetLimits.maximumStream
        case .deliverResult, .refused: 1 + 512
        case .pieceRequest: 16 + 1 + 1 + 64
        case .welcome: 0
        case .pairCard: 65 + 64 + 32 + 255
        case .pairDecision: 1
        case .pairReveal: 32
        case .emergencyRule: UInt64(EmergencyRule.length)
        case .pieceAnswer: 1 + 12
        }
    }
}

extension PeerMessageType: CustomStringConvertible {
    /// The message's name in words, for errors and logs.
    public var description: String {
        switch self {
        case .deliver: "share delivery"
        case .deliverResult: "delivery result"
        case .pieceRequest: "piece request"
        case .piece: "piece"
        case .refused: "refusal"
        case .welcome: "welcome"
        case .pairCard: "pairing card"
        case .pairDecision: "pairing decision"
        case .pairReveal: "pairing reveal"
        case .emergencyRule: "emergency rule"
        case .pieceAnswer: "piece answer"
        }
    }
}

extension PeerMessageType {
    /// The first frame of a message (§2): version ‖ type ‖ body length (8) ‖ the body's start.
    /// Checks the version, the type, the type's bound on the length, and that the frame does
    /// not run past the body.
    static func parseHeader(_ frame: [UInt8]) throws(NetError) -> (type: PeerMessageType, length: UInt64, start: [UInt8]) {
        guard frame.count >= 10, frame[0] == NetLimits.protocolVersion else {
            throw NetError.protocolViolation(frame.first.map { "unknown protocol version \($0)" } ?? "empty message")
        }
        guard let type = PeerMessageType(rawValue: frame[1]) else { throw NetError.protocolViolation("unknown message type \(frame[1])") }
        let length = frame[2..<10].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard length <= type.maximumBody else { throw NetError.protocolViolation("a \(type) message of \(length) bytes is too large") }
        let start = Array(frame[10...])
        guard UInt64(start.count) <= length else { throw NetError.protocolViolation("a message overruns its length") }
        return (type, length, start)
    }
}

/// A piece request: which secret, who asks (j), whom (i), and the proof.
struct PieceRequest: Equatable {
    let secretID: [UInt8]
    let requester: Int
    let holder: Int
    let proof: [UInt8]

    var encoded: [UInt8] { secretID + [UInt8(requester), UInt8(holder)] + proof }

    init(secretID: [UInt8], requester: Int, holder: Int, proof: [UInt8]) {
        self.secretID = secretID
        self.requester = requester
        self.holder = holder
        self.proof = proof
    }

    init?(_ body: [UInt8]) {
        guard body.count == 16 + 2 + 64 else { return nil }
        secretID = Array(body[0..<16])
        requester = Int(body[16])
        holder = Int(body[17])
        proof = Array(body[18...])
    }
}
