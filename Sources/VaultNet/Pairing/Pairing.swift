import Foundation
import VaultCore

/// Pairing by short code: trust established over the LAN instead of by scanning a card.
///
/// Two not-yet-trusting machines run the XX handshake, exchange their cards inside it, and
/// each person compares an 8-digit code derived from the handshake hash. A man in the
/// middle runs two handshakes with different hashes, so the codes would differ. Each side
/// stores the other only if both people confirmed.
public enum Pairing {
    /// Puts the code and the other side's card to the person; true to confirm. It may also
    /// refuse without asking (a label or key already trusted).
    public typealias Confirm = @Sendable (_ code: String, _ card: KeyCard, _ label: Label) -> Bool

    /// The code both screens show: 8 digits (about 27 bits) from
    /// BLAKE2b-512("vault/v1/sas" ‖ handshake hash), as "1234 5678".
    public static func code(handshakeHash: [UInt8]) -> String {
        let digest = NoiseCrypto.hash(Array("vault/v1/sas".utf8), handshakeHash)
        let value = digest.prefix(5).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 100_000_000
        let digits = String(value)
        let padded = String(repeating: "0", count: 8 - digits.count) + digits
        return padded.prefix(4) + " " + padded.suffix(4)
    }

    /// Runs the (blocking, terminal) question off the async thread pool.
    static func ask(_ confirm: @escaping Confirm, _ code: String, _ card: KeyCard, _ label: Label) async -> Bool {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: confirm(code, card, label)) }
        }
    }

    static func cardMessage(_ identity: Identity) -> [UInt8] {
        identity.card.encoded + Array(identity.label.value.utf8)
    }

    /// Reads a `pairCard` body and checks the card is the key the handshake proved.
    static func parseCard(_ body: [UInt8], remoteKey: [UInt8]) throws -> (KeyCard, Label) {
        guard body.count > KeyCard.encodedLength else { throw NetError.protocolViolation("a pairing card without a label") }
        let card = try KeyCard(encoded: Array(body.prefix(KeyCard.encodedLength)))
        guard card.agreementKey == remoteKey else { throw NetError.protocolViolation("the pairing card is not the handshake's key") }
        guard let text = String(validating: body.dropFirst(KeyCard.encodedLength), as: UTF8.self) else {
            throw NetError.protocolViolation("the pairing label is not UTF-8")
        }
        return (card, try Label(text))
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
            try await channel.send(.pairCard, cardMessage(identity))
            let (type, body) = try await channel.receive()
            if type == .refused { throw NetError.refused(RefusalCode.parse(body)?.0 ?? .malformed, RefusalCode.parse(body)?.1 ?? "") }
            guard type == .pairCard else { throw NetError.protocolViolation("expected a pairing card, got \(type)") }
            let (card, label) = try parseCard(body, remoteKey: channel.remoteKey)
            let mine = await ask(confirm, code(handshakeHash: channel.handshakeHash), card, label)
            try await channel.send(.pairDecision, [mine ? 1 : 0])
            let (answerType, answer) = try await channel.receive()
            guard answerType == .pairDecision, answer.count == 1 else { throw NetError.protocolViolation("expected a pairing decision") }
            guard mine else { throw NetError.refused(.pairingDeclined, "you declined") }
            guard answer[0] == 1 else { throw NetError.refused(.pairingDeclined, "the other side declined") }
            return (card, label)
        }
    }
}
