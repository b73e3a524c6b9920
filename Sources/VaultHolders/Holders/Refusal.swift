import VaultCore

/// Why a holder refused, without asking its person: one enum, one numbering, on every wire
/// (the LAN's refusal message and delivery result, PROTOCOL.md §3; a holder record's piece
/// answer, FORMAT.md §20). 1 to 9 are a piece request's checks, whichever way it came; the
/// rest are the LAN's own (a connection, a delivery, pairing). A requester is told which
/// check failed; what a refusal means is in its code, never in the words beside it.
public enum Refusal: UInt8, Sendable, CustomStringConvertible {
    /// The requester's card is not a trusted peer's.
    case untrusted = 1
    /// The holder holds no share of that secret from that dealer.
    case unknownSecret = 2
    /// The proof of possession does not verify (or the requester claims another's index).
    case badProof = 3
    /// The request was answered before (its nonce is known).
    case replayed = 4
    /// The request had expired when it arrived.
    case expired = 5
    /// The request was made for another holder.
    case otherHolder = 6
    /// Too many requests (or connections) wait already.
    case busy = 7
    /// It came from another member than the requester it names.
    case redirected = 8
    /// The requester is not a member of the group it came through.
    case notAMember = 9
    /// Too many requests from this peer in the last minute (the LAN).
    case rateLimited = 10
    /// A holder does not release to its own index.
    case sameIndex = 11
    /// The holder's person did not confirm a delivery (`vault serve --confirm`).
    case notConfirmed = 12
    /// A message that does not parse, or is not expected.
    case malformed = 13
    /// The holder could not store what came (its disk).
    case storage = 14
    /// A delivered bundle was not one to keep (the words say why).
    case rejectedBundle = 15
    /// The server does not accept pairing now.
    case notPairing = 16
    /// Pairing was declined.
    case pairingDeclined = 17
    /// An emergency rule was not one to take (the words say why).
    case rejectedRule = 18

    public var description: String {
        switch self {
        case .untrusted: "untrusted key: the holder does not trust the card that asks"
        case .unknownSecret: "the holder holds no share of that secret from that dealer"
        case .badProof: "the proof of possession does not verify"
        case .replayed: "the holder has answered this request before (a replay)"
        case .expired: "the request had expired when it arrived"
        case .otherHolder: "the request was made for another holder"
        case .busy: "the holder is busy: too many requests or connections wait there"
        case .redirected: "it came from another member than the requester it names"
        case .notAMember: "the requester is not a member of the group it came through"
        case .rateLimited: "rate limited"
        case .sameIndex: "a holder does not release to its own index"
        case .notConfirmed: "not confirmed by the holder"
        case .malformed: "malformed request"
        case .storage: "storage error"
        case .rejectedBundle: "bundle rejected"
        case .notPairing: "not accepting pairing (run 'vault serve --pairing' there)"
        case .pairingDeclined: "pairing declined"
        case .rejectedRule: "emergency rule refused"
        }
    }
}
