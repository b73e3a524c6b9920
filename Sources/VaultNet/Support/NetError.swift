import VaultCore
import VaultHolders

/// Every failure VaultNet reports. Messages are lowercase, without a final period, and
/// never carry key material.
public enum NetError: UserFacingError, Equatable {
    /// X25519 gave the all-zero output: the peer's key has small order.
    case weakKey
    /// A Noise message did not authenticate: altered, replayed, or under another key.
    case decryption
    /// A Noise message was shorter than its pattern requires.
    case truncated
    /// A Noise message would exceed 65535 bytes.
    case tooLong
    /// A handshake step came in the wrong order.
    case outOfOrder
    /// A session sent 2^64 - 1 messages, a counter Noise reserves.
    case nonceExhausted
    /// The connection closed: the peer hung up, or went silent past the timeout.
    case closed
    /// The peer broke the protocol; the text says how.
    case protocolViolation(String)
    /// The peer refused, with its code and reason.
    case refused(Refusal, String)
    /// A holder answered a piece request without releasing it: its person denied it, or
    /// nobody approved in time.
    case notReleased(PieceAnswer)
    /// The peer at that address holds another key than the one trusted under its label.
    case unexpectedPeer(expected: String)
    /// The peer could not be reached.
    case unreachable(String)
    /// The connection broke part way (reset, or a socket error); the text is the system's
    /// reason.
    case connectionLost(String)

    public var description: String {
        switch self {
        case .weakKey: "the peer's key has small order"
        case .decryption: "a message did not authenticate"
        case .truncated: "a handshake message is truncated"
        case .tooLong: "a message is longer than 65535 bytes"
        case .outOfOrder: "a handshake message came out of order"
        case .nonceExhausted: "the session's message counter is exhausted"
        case .closed: "the connection closed (the peer hung up or went silent)"
        case .protocolViolation(let detail): "protocol violation: \(detail)"
        // The reason is the peer's own text: shown escaped, and cut short.
        case .refused(let code, let reason): reason.isEmpty ? "refused: \(code)" : "refused: \(code) (\(TerminalText.escaped(reason, limit: 200)))"
        case .notReleased(.denied): "refused: the holder denied the request"
        case .notReleased(.timedOut): "refused: the holder did not approve in time"
        case .notReleased(let outcome): "refused: the holder answered \(outcome)"
        case .unexpectedPeer(let label): "the peer at that address is not '\(label)': its key differs from the one you trust"
        case .unreachable(let detail): "unreachable: \(detail)"
        case .connectionLost(let reason): "the connection broke: \(reason)"
        }
    }
}
