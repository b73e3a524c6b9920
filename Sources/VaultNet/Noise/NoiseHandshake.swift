import VaultCore

/// A Noise handshake (revision 34) for 25519_ChaChaPoly_BLAKE2b, as an explicit state
/// machine: each transition checks the state it needs and sets the next state last.
///
/// After the last message the handshake yields a ``NoiseSession`` and the handshake hash,
/// which both sides share and which binds application proofs to this channel.
public final class NoiseHandshake {
    enum State: Equatable {
        /// This side writes the next message.
        case writing
        /// This side reads the next message.
        case reading
        /// Every message is done; the session has been taken or can be.
        case complete
        /// A message failed; the handshake can go no further.
        case failed
    }

    private(set) var state: State
    private let pattern: NoisePattern
    private let initiator: Bool
    private var symmetric: NoiseSymmetricState
    private var messageIndex = 0
    private let staticKey: (secret: SecureBytes, publicKey: [UInt8])?
    private var ephemeral: (secret: SecureBytes, publicKey: [UInt8])?
    /// The peer's static key, once known.
    public private(set) var remoteStatic: [UInt8]?
    private var remoteEphemeral: [UInt8]?
    private var transport: (NoiseCipherState, NoiseCipherState)?

    /// Starts a handshake. `ephemeral` is for test vectors only: a fixed ephemeral key in
    /// production would forfeit forward secrecy, so callers pass nil and one is generated.
    init(pattern: NoisePattern, initiator: Bool, prologue: [UInt8], staticSecret: SecureBytes?,
         remoteStatic: [UInt8]? = nil, ephemeral: SecureBytes? = nil) {
        self.pattern = pattern
        self.initiator = initiator
        symmetric = NoiseSymmetricState(protocolName: pattern.protocolName)
        staticKey = staticSecret.map { ($0, NoiseCrypto.publicKey(of: $0)) }
        self.ephemeral = ephemeral.map { ($0, NoiseCrypto.publicKey(of: $0)) }
        self.remoteStatic = remoteStatic
        symmetric.mixHash(prologue)
        // Pre-message keys, the initiator's first.
        if pattern.initiatorPreMessage {
            symmetric.mixHash(initiator ? staticKey!.publicKey : remoteStatic!)
        }
        if pattern.responderPreMessage {
            symmetric.mixHash(initiator ? remoteStatic! : staticKey!.publicKey)
        }
        state = initiator ? .writing : .reading
    }

    /// vault's handshake: XX with the prologue `vault/1` and the identity's X25519 key.
    public convenience init(initiator: Bool, identitySecret: SecureBytes) {
        self.init(pattern: .xx, initiator: initiator, prologue: NetLimits.prologue, staticSecret: identitySecret)
    }

    /// The handshake hash: final once the handshake is complete.
    public var handshakeHash: [UInt8] { symmetric.handshakeHash }

    /// Whether the handshake is done.
    public var isComplete: Bool { state == .complete }

    /// Writes the next handshake message carrying `payload`.
    public func writeMessage(payload: [UInt8] = []) throws(NetError) -> [UInt8] {
        guard state == .writing else { throw .outOfOrder }
        do throws(NetError) {
            var out: [UInt8] = []
            for token in pattern.messages[messageIndex] {
                switch token {
                case .e:
                    if ephemeral == nil { ephemeral = NoiseCrypto.generateKeyPair() }
                    out += ephemeral!.publicKey
                    symmetric.mixHash(ephemeral!.publicKey)
                case .s:
                    out += try symmetric.encryptAndHash(staticKey!.publicKey)
                default:
                    try mixDH(token)
                }
            }
            out += try symmetric.encryptAndHash(payload)
            guard out.count <= NetLimits.noiseMaximumMessage else { throw .tooLong }
            advance()
            return out
        } catch {
            state = .failed
            throw error
        }
    }

    /// Reads the next handshake message and returns its payload.
    public func readMessage(_ message: [UInt8]) throws(NetError) -> [UInt8] {
        guard state == .reading else { throw .outOfOrder }
        do throws(NetError) {
            var rest = message[...]
            func take(_ count: Int) throws(NetError) -> [UInt8] {
                guard rest.count >= count else { throw .truncated }
                defer { rest = rest.dropFirst(count) }
                return Array(rest.prefix(count))
            }
            for token in pattern.messages[messageIndex] {
                switch token {
                case .e:
                    remoteEphemeral = try take(NoiseCrypto.dhLength)
                    symmetric.mixHash(remoteEphemeral!)
                case .s:
                    let length = NoiseCrypto.dhLength + (symmetric.hasKey ? NetLimits.noiseTagLength : 0)
                    remoteStatic = try symmetric.decryptAndHash(try take(length))
                default:
                    try mixDH(token)
                }
            }
            let payload = try symmetric.decryptAndHash(Array(rest))
            advance()
            return payload
        } catch {
            state = .failed
            throw error
        }
    }

    /// The transport session. Only once complete; the ephemeral secret is gone by then.
    public func session() throws(NetError) -> NoiseSession {
        guard state == .complete, let transport else { throw .outOfOrder }
        return initiator
            ? NoiseSession(sending: transport.0, receiving: transport.1, handshakeHash: handshakeHash)
            : NoiseSession(sending: transport.1, receiving: transport.0, handshakeHash: handshakeHash)
    }

    private func mixDH(_ token: NoisePattern.Token) throws(NetError) {
        // es: the initiator's ephemeral with the responder's static; se the reverse.
        let (local, remote): (SecureBytes?, [UInt8]?) = switch (token, initiator) {
        case (.ee, _): (ephemeral?.secret, remoteEphemeral)
        case (.es, true), (.se, false): (ephemeral?.secret, remoteStatic)
        case (.es, false), (.se, true): (staticKey?.secret, remoteEphemeral)
        default: (staticKey?.secret, remoteStatic)  // .ss
        }
        guard let local, let remote else { throw .outOfOrder }
        symmetric.mixKey(try NoiseCrypto.dh(local, remote))
    }

    private func advance() {
        messageIndex += 1
        if messageIndex == pattern.messages.count {
            transport = symmetric.split()
            // Forward secrecy: the ephemeral secret is dropped (and zeroed by SecureBytes).
            ephemeral = nil
            state = .complete
        } else {
            state = pattern.isOneWay ? .complete : (state == .writing ? .reading : .writing)
        }
    }
}

/// The transport phase: one CipherState per direction, and the handshake hash.
public struct NoiseSession {
    private var sending: NoiseCipherState
    private var receiving: NoiseCipherState
    /// Binds application-level proofs to this channel.
    public let handshakeHash: [UInt8]

    init(sending: NoiseCipherState, receiving: NoiseCipherState, handshakeHash: [UInt8]) {
        self.sending = sending
        self.receiving = receiving
        self.handshakeHash = handshakeHash
    }

    /// Encrypts one transport message (at most 65535 bytes once sealed).
    public mutating func seal(_ plaintext: [UInt8]) throws(NetError) -> [UInt8] {
        guard plaintext.count + NetLimits.noiseTagLength <= NetLimits.noiseMaximumMessage else { throw .tooLong }
        return try sending.encrypt(ad: [], plaintext: plaintext)
    }

    /// Decrypts one transport message.
    public mutating func open(_ ciphertext: [UInt8]) throws(NetError) -> [UInt8] {
        try receiving.decrypt(ad: [], ciphertext: ciphertext)
    }
}
