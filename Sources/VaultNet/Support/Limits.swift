import VaultCore
import VaultHolders

/// Network defaults and bounds, in one place. Spec values first, then this implementation's.
public enum NetLimits {
    // Noise (revision 34).
    /// The largest Noise message: its 2-byte length prefix on TCP caps it.
    public static let noiseMaximumMessage = 65535
    /// The AEAD tag every encrypted Noise message carries.
    static let noiseTagLength = 16

    // vault.
    /// The TCP port `vault serve` listens on by default.
    public static let defaultPort: UInt16 = 7733
    /// The Noise prologue, binding every handshake to this protocol's version.
    public static let prologue = Array("vault/1".utf8)
    /// The application protocol's version byte.
    /// Version 2 (2026-12-01): refusals in the one numbering of ``Refusal``, and piece
    /// answers with their fields (`pieceAnswer`); a peer of version 1 is told so, not misread.
    static let protocolVersion: UInt8 = 2
    /// Plaintext per Noise transport message.
    static let framePlaintext = noiseMaximumMessage - noiseTagLength
    /// The largest streamed body (a bundle or a piece): 1 TiB and change.
    static let maximumStream: UInt64 = (1 << 40) + (1 << 20)
    /// The whole handshake must finish within this many seconds.
    public static let handshakeSeconds: Int64 = 10
    /// A connection silent this long is closed.
    public static let idleSeconds: Int64 = 30
    /// Connections `vault serve` holds before their handshake completes; a newcomer past
    /// this closes the oldest of them (see ConnectionSlots).
    public static let handshakingConnections = 256
    /// Connections `vault serve` holds after their handshake; a newcomer past this is refused
    /// as busy.
    public static let establishedConnections = 64
    /// The longest pairing window `vault serve --pairing` opens: 5 minutes.
    public static let maximumPairingWindow: Double = 300
    /// Pairing attempts `vault serve --pairing` accepts per minute, from all keys together.
    public static let pairingAttemptsPerMinute = 5
    /// Piece requests one peer may make per minute (asking again about a request that
    /// waits for consent does not count).
    public static let pieceRequestsPerMinute = 10
    /// How long a piece request waits for the holder's consent: 2 minutes.
    public static let approvalSeconds = ConsentLimits.approvalSeconds
    /// Requests waiting for consent at once; past this, new ones are turned away.
    static let pendingApprovals = ConsentLimits.pendingApprovals
    /// How often a requester asks again while its request waits for consent.
    static let approvalPollSeconds: Double = 1
}
