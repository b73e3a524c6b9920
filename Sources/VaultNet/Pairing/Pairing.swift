import Foundation
import VaultCore
import VaultHolders

/// Pairing by short code: trust established over the LAN instead of by scanning a card.
///
/// Two not-yet-trusting machines run the XX handshake, exchange signed cards inside it, and
/// each person compares an 8-digit code. A man in the middle runs two handshakes with
/// different hashes; to pass, it would have to make the two codes equal.
///
/// The code is not a function of the handshake hash alone: that let a man in the middle
/// finish one side's handshake, then vary its other handshake until the codes matched (about
/// 10^8 tries, a minute of one core). Now, after the handshake, the client commits to a
/// nonce N_a (sending only its hash), the server answers with its nonce N_b, and only then
/// the client reveals N_a; the code comes from the handshake hash and both nonces. Whichever
/// side a man in the middle deals with second, it must fix its own nonce before it can know
/// the code that side will show, so each attempt matches with probability 10^-8, and every
/// attempt is a prompt on a person's screen (and rate limited).
public enum Pairing {
    /// Puts the code and the other side's card to the person; true to confirm. It may also
    /// refuse without asking (a label or key already trusted).
    public typealias Confirm = @Sendable (_ code: String, _ card: KeyCard, _ label: Label) -> Bool

    static let nonceLength = 32
    static let signatureLength = 64

    /// The code both screens show: 8 digits (about 27 bits) from
    /// BLAKE2b-512("vault/v1/sas" ‖ handshake hash ‖ N_a ‖ N_b), as "1234 5678".
    public static func code(handshakeHash: [UInt8], clientNonce: [UInt8], serverNonce: [UInt8]) -> String {
        let digest = NoiseCrypto.hash(Array("vault/v1/sas".utf8), handshakeHash, clientNonce, serverNonce)
        let value = digest.prefix(5).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 100_000_000
        let digits = String(value)
        let padded = String(repeating: "0", count: 8 - digits.count) + digits
        return padded.prefix(4) + " " + padded.suffix(4)
    }

    /// The client's commitment to its nonce: BLAKE2b-512("vault/v1/pair-commit" ‖ h ‖ N_a),
    /// cut to 32 bytes.
    static func commitment(handshakeHash: [UInt8], nonce: [UInt8]) -> [UInt8] {
        Array(NoiseCrypto.hash(Array("vault/v1/pair-commit".utf8), handshakeHash, nonce).prefix(32))
    }

    /// What a card's owner signs: the card's Ed25519 half then belongs, provably, with the
    /// X25519 half this handshake authenticated.
    static func signedContext(handshakeHash: [UInt8]) -> [UInt8] { Array("vault/v1/pair-card".utf8) + handshakeHash }

    /// Runs the (blocking, terminal) question off the async thread pool.
    static func ask(_ confirm: @escaping Confirm, _ code: String, _ card: KeyCard, _ label: Label) async -> Bool {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: confirm(code, card, label)) }
        }
    }

    static func cardMessage(_ identity: Identity, handshakeHash: [UInt8], value: [UInt8]) -> [UInt8] {
        identity.card.encoded + identity.sign(signedContext(handshakeHash: handshakeHash)) + value + Array(identity.label.value.utf8)
    }

    /// Reads a `pairCard` body: the card must be the key the handshake proved, and its
    /// signature over this handshake's hash must hold. Returns the card, its label and the
    /// 32-byte value (commitment or nonce).
    static func parseCard(_ body: [UInt8], remoteKey: [UInt8], handshakeHash: [UInt8]) throws -> (KeyCard, Label, [UInt8]) {
        let fixed = KeyCard.encodedLength + signatureLength + nonceLength
        guard body.count > fixed else { throw NetError.protocolViolation("a pairing card without a label") }
        let card = try KeyCard(encoded: Array(body.prefix(KeyCard.encodedLength)))
        guard card.agreementKey == remoteKey else { throw NetError.protocolViolation("the pairing card is not the handshake's key") }
        let signature = Array(body[KeyCard.encodedLength..<(KeyCard.encodedLength + signatureLength)])
        guard card.verify(signature: signature, of: signedContext(handshakeHash: handshakeHash)) else {
            throw NetError.protocolViolation("the pairing card's signing key did not sign this handshake")
        }
        let value = Array(body[(KeyCard.encodedLength + signatureLength)..<fixed])
        guard let text = String(validating: body.dropFirst(fixed), as: UTF8.self) else {
            throw NetError.protocolViolation("the pairing label is not UTF-8")
        }
        return (card, try Label(text), value)
    }

    /// The client's side: pairs with the `vault serve --pairing` at `address`. Returns the
    /// peer to store, once both people confirmed.
    public static func pair(with address: PeerAddress, identity: Identity, confirm: @escaping Confirm) async throws -> (KeyCard, Label) {
        do {
            return try await exchange(with: address, identity: identity, confirm: confirm)
        } catch NetError.refused(.untrusted, _) {
            // A server that is not pairing refuses an unknown key like any other.
            throw NetError.refused(.notPairing, "")
        }
    }

    private static func exchange(with address: PeerAddress, identity: Identity, confirm: @escaping Confirm) async throws -> (KeyCard, Label) {
        try await PeerClient.connectUnknown(at: address, identity: identity) { channel in
            let hash = channel.handshakeHash
            var nonce = SecureRandom().bytes(nonceLength)
            defer { nonce.wipe() }
            try await channel.send(.pairCard, cardMessage(identity, handshakeHash: hash, value: commitment(handshakeHash: hash, nonce: nonce)))
            let (type, body) = try await channel.receive()
            if type == .refused { throw NetError.refused(Refusal.parse(body)?.0 ?? .malformed, Refusal.parse(body)?.1 ?? "") }
            guard type == .pairCard else { throw NetError.protocolViolation("expected a pairing card, got \(type)") }
            let (card, label, serverNonce) = try parseCard(body, remoteKey: channel.remoteKey, handshakeHash: hash)
            // Revealed only now: the server chose its nonce without knowing ours.
            try await channel.send(.pairReveal, nonce)
            let mine = await ask(confirm, code(handshakeHash: hash, clientNonce: nonce, serverNonce: serverNonce), card, label)
            try await channel.send(.pairDecision, [mine ? 1 : 0])
            let (answerType, answer) = try await channel.receive()
            guard answerType == .pairDecision, answer.count == 1 else { throw NetError.protocolViolation("expected a pairing decision") }
            guard mine else { throw NetError.refused(.pairingDeclined, "you declined") }
            guard answer[0] == 1 else { throw NetError.refused(.pairingDeclined, "the other side declined") }
            return (card, label)
        }
    }
}
