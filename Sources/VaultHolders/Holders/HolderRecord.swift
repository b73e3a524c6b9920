import VaultCore
import Foundation

/// What a secret's holders send each other through a group's relays (Docs/FORMAT.md §20):
/// the plaintext of a holder message, an object message (§19) of kind `holder`, sealed to its
/// one recipient. The relays see that holders talk, when, and how much; never which step
/// this is, nor which secret it is about.
///
///     record = version 0x01 ‖ kind (1) ‖ fields
///
/// A share offer and a released piece end in a file-sized part (a bundle, a piece), which
/// is read from the record's file after its head; ``HolderRecord/Head`` is the rest. Every
/// other record is padded with zeros to ``paddedLength`` bytes, so that a relay cannot tell
/// a request from an answer, nor one answer from another, by its size.
public enum HolderRecord {
    static let version: UInt8 = 1
    /// The length of every record but a share offer and a release.
    static let paddedLength = 512

    /// The kinds, as the byte after the version says.
    public enum Kind: UInt8, Sendable {
        /// A dealer's share bundle (§9) for its holder; the bundle follows, to the end.
        case shareOffer = 1
        /// A holder's answer to an offer: stored, refused, or waiting for its person.
        case shareAnswer = 2
        /// A request for the recipient's piece (``RelayPieceRequest``).
        case pieceRequest = 3
        /// A holder's answer to a piece request; a released piece follows when released.
        case pieceAnswer = 4
        /// A dealer's emergency rule for its holder (``EmergencyRule``, FORMAT §21).
        case emergencyRule = 5
        /// A holder's answer to an emergency rule: the role taken, declined, or waiting.
        case roleAnswer = 6
        /// A holder tells the dealer where an emergency request stands (``Notice``).
        case emergencyNotice = 7
        /// A dealer's denial or approval of an emergency request (``EmergencyDecision``).
        case emergencyDecision = 8
        /// A requester withdraws a piece request (its nonce): its recovery finished, or
        /// ended, and the holder's person need not be asked any more.
        case withdrawal = 9
    }

    /// A holder's answer to an emergency rule.
    public enum RoleState: UInt8, Sendable {
        case accepted = 1
        case declined = 2
        /// Its person is asked whether to take the role.
        case waiting = 3
        /// The rule was turned off, and taken so.
        case off = 4
    }

    /// Where an emergency request stands at a holder, as it tells the dealer.
    public enum NoticeState: UInt8, Sendable {
        /// The wait runs, until the notice's release time.
        case waiting = 1
        /// The dealer's denial cancelled it.
        case cancelled = 2
        /// The holder's person refused it.
        case denied = 3
        /// The piece went to the trustee (the wait ended, or the dealer approved).
        case released = 4
        /// A newer request of the trustee's for the same share replaced it here: that one's
        /// own notice follows.
        case replaced = 5
    }

    /// A holder's notice to a secret's dealer about an emergency request: the trustee's
    /// request as it came (signed by the trustee), when this holder received it and when it
    /// releases, by this holder's clock.
    public struct Notice: Sendable {
        public let state: NoticeState
        public let received: UInt64
        public let releaseAt: UInt64
        public let request: RelayPieceRequest

        public init(state: NoticeState, received: UInt64, releaseAt: UInt64, request: RelayPieceRequest) {
            self.state = state
            self.received = received
            self.releaseAt = releaseAt
            self.request = request
        }
    }

    /// A holder's answer to a share offer.
    public enum ShareState: UInt8, Sendable {
        case stored = 1
        case refused = 2
        case waiting = 3
    }

    /// A record's head: everything but a bundle or a piece that follows it in the file.
    public enum Head: Sendable {
        case shareOffer
        case shareAnswer(secretID: [UInt8], holder: Int, state: ShareState)
        case pieceRequest(RelayPieceRequest)
        /// `nonce` names the request answered; with `released`, `prefix` is the answering
        /// holder's bundle prefix.
        case pieceAnswer(nonce: [UInt8], outcome: PieceAnswer, prefix: [UInt8]?)
        case emergencyRule(EmergencyRule)
        /// `issued` names the rule answered.
        case roleAnswer(secretID: [UInt8], issued: UInt64, state: RoleState)
        case emergencyNotice(Notice)
        case emergencyDecision(EmergencyDecision)
        /// `nonce` names the piece request withdrawn.
        case withdrawal(nonce: [UInt8])
    }

    /// Where the part that follows a head starts in the record: a share offer's bundle, a
    /// released piece; nil for a record that ends with its head.
    public static func tailOffset(of head: Head) -> UInt64? {
        switch head {
        case .shareOffer: 2
        case .pieceAnswer(_, .released, let prefix?): UInt64(2 + 16 + 1 + 4 + prefix.count)
        default: nil
        }
    }

    /// Longest head: a piece answer with the largest bundle prefix.
    static let maximumHeadLength = 2 + 16 + 1 + 4 + 9 + BundleHeader.maximumLength + 64

    // MARK: Writing

    /// The head of a share offer; the bundle's bytes follow it.
    public static func shareOffer() -> [UInt8] { [version, Kind.shareOffer.rawValue] }

    public static func shareAnswer(secretID: [UInt8], holder: Int, state: ShareState) -> [UInt8] {
        padded([version, Kind.shareAnswer.rawValue] + secretID + [UInt8(holder), state.rawValue])
    }

    public static func pieceRequest(_ request: RelayPieceRequest) -> [UInt8] {
        padded([version, Kind.pieceRequest.rawValue] + request.encoded())
    }

    public static func emergencyRule(_ rule: EmergencyRule) -> [UInt8] {
        padded([version, Kind.emergencyRule.rawValue] + rule.encoded)
    }

    public static func roleAnswer(secretID: [UInt8], issued: UInt64, state: RoleState) -> [UInt8] {
        var w = ByteWriter()
        w.raw(secretID)
        w.u64(issued)
        w.u8(state.rawValue)
        return padded([version, Kind.roleAnswer.rawValue] + w.bytes)
    }

    public static func emergencyNotice(_ notice: Notice) -> [UInt8] {
        var w = ByteWriter()
        w.u8(notice.state.rawValue)
        w.u64(notice.received)
        w.u64(notice.releaseAt)
        w.raw(notice.request.encoded())
        return padded([version, Kind.emergencyNotice.rawValue] + w.bytes)
    }

    public static func emergencyDecision(_ decision: EmergencyDecision) -> [UInt8] {
        padded([version, Kind.emergencyDecision.rawValue] + decision.encoded)
    }

    public static func withdrawal(nonce: [UInt8]) -> [UInt8] {
        padded([version, Kind.withdrawal.rawValue] + nonce)
    }

    private static func padded(_ record: [UInt8]) -> [UInt8] {
        record + [UInt8](repeating: 0, count: paddedLength - record.count)
    }

    /// The head of a piece answer; for `released`, `prefix` is the holder's bundle prefix and
    /// the released piece follows.
    public static func pieceAnswer(nonce: [UInt8], outcome: PieceAnswer, prefix: [UInt8]? = nil) -> [UInt8] {
        var w = ByteWriter()
        w.u8(version)
        w.u8(Kind.pieceAnswer.rawValue)
        w.raw(nonce)
        w.raw(outcome.encoded)
        if outcome == .released {
            w.u32(UInt32(prefix!.count))
            w.raw(prefix!)
            return w.bytes
        }
        return padded(w.bytes)
    }

    // MARK: Reading

    /// Reads a record's head from `source`, leaving it at the bundle or piece that follows
    /// (for a share offer, a released piece), which must be read to the end; any other
    /// record must end with its head.
    public static func readHead(_ source: inout some ByteSource) throws -> Head {
        func fail(_ detail: String) -> VaultError { .malformed(what: "the holder message", detail: detail) }
        func take(_ count: Int) throws -> [UInt8] {
            let bytes = try source.readFully(count)
            guard bytes.count == count else { throw VaultError.truncated(what: "the holder message") }
            return bytes
        }
        // A time a keystore can keep (Unix seconds, at most 2^63 − 1).
        func time(_ bytes: [UInt8]) throws -> UInt64 {
            let value = bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            guard value <= UInt64(Int64.max) else { throw fail("a time out of range") }
            return value
        }
        let start = try take(2)
        guard start[0] == version else { throw VaultError.unsupportedVersion(what: "the holder message", version: start[0], supported: version) }
        guard let kind = Kind(rawValue: start[1]) else { throw fail("unknown kind \(start[1])") }
        let head: Head
        switch kind {
        case .shareOffer:
            return .shareOffer
        case .shareAnswer:
            let fields = try take(18)
            guard let state = ShareState(rawValue: fields[17]), fields[16] >= 1 else { throw fail("a bad share answer") }
            head = .shareAnswer(secretID: Array(fields[0..<16]), holder: Int(fields[16]), state: state)
        case .pieceRequest:
            head = .pieceRequest(try RelayPieceRequest(parsing: try take(RelayPieceRequest.length)))
        case .pieceAnswer:
            let nonce = try take(16)
            let code = try take(1)[0]
            guard let length = PieceAnswer.fieldsLength(of: code) else { throw fail("an unknown outcome \(code)") }
            let outcome = try PieceAnswer(code: code, fields: try take(length))
            if outcome == .released {
                let length = Int(try take(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
                guard length >= 9 + 64, length <= 9 + BundleHeader.maximumLength + 64 else { throw fail("a bad bundle prefix length") }
                return .pieceAnswer(nonce: nonce, outcome: .released, prefix: try take(length))
            }
            head = .pieceAnswer(nonce: nonce, outcome: outcome, prefix: nil)
        case .emergencyRule:
            head = .emergencyRule(try EmergencyRule(parsing: try take(EmergencyRule.length)))
        case .roleAnswer:
            let fields = try take(16 + 8 + 1)
            guard let state = RoleState(rawValue: fields[24]) else { throw fail("an unknown role answer \(fields[24])") }
            head = .roleAnswer(secretID: Array(fields[0..<16]), issued: try time(Array(fields[16..<24])), state: state)
        case .emergencyNotice:
            let code = try take(1)[0]
            guard let state = NoticeState(rawValue: code) else { throw fail("an unknown notice \(code)") }
            let received = try time(take(8)), releaseAt = try time(take(8))
            guard releaseAt >= received else { throw fail("it releases before it was received") }
            let request = try RelayPieceRequest(parsing: try take(RelayPieceRequest.length))
            head = .emergencyNotice(Notice(state: state, received: received, releaseAt: releaseAt, request: request))
        case .emergencyDecision:
            head = .emergencyDecision(try EmergencyDecision(parsing: try take(EmergencyDecision.length)))
        case .withdrawal:
            head = .withdrawal(nonce: try take(16))
        }
        // Zeros to the padded length, and nothing after.
        let used = 2 + (HolderRecord.headLength(head) ?? 0)
        let padding = try source.readFully(paddedLength - used + 1)
        guard padding.count == paddedLength - used, padding.allSatisfy({ $0 == 0 }) else {
            throw fail("it is not padded to \(paddedLength) bytes with zeros")
        }
        return head
    }

    /// The bytes of a padded record's fields after its kind.
    private static func headLength(_ head: Head) -> Int? {
        switch head {
        case .shareOffer: nil
        case .shareAnswer: 18
        case .pieceRequest: RelayPieceRequest.length
        case .pieceAnswer(_, .released, _): nil
        case .pieceAnswer(_, let outcome, _): 16 + outcome.encoded.count
        case .emergencyRule: EmergencyRule.length
        case .roleAnswer: 16 + 8 + 1
        case .emergencyNotice: 1 + 8 + 8 + RelayPieceRequest.length
        case .emergencyDecision: EmergencyDecision.length
        case .withdrawal: 16
        }
    }
}
