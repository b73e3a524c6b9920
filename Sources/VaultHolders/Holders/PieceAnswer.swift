import VaultCore

/// How a holder answered a piece request, on every wire: a holder record's piece answer
/// through relays (FORMAT.md §20, kind 4, after the nonce) and the LAN's piece answer
/// (PROTOCOL.md §4, message type 11), one encoding for both:
///
///     answer = outcome (1) ‖ fields
///
/// | outcome | fields |
/// |---|---|
/// | 1 released | (through relays: the bundle prefix and the piece follow; on the LAN the piece comes as its own message) |
/// | 2 denied by the holder's person | |
/// | 3 timed out: nobody answered in time | |
/// | 4 waiting for its person (read only: written as 8 since 2026-12-01) | until (8, Unix seconds) |
/// | 5 refused on a check | refusal (1, ``Refusal``) |
/// | 6 denied by the secret's dealer (an emergency request) | |
/// | 7 an emergency wait runs | until (8, Unix seconds) |
/// | 8 waiting for its person | the holder's request id (4) ‖ until (8, Unix seconds) |
///
/// Every field is a field: a requester never reads a request id or a time out of words.
public enum PieceAnswer: Equatable, Sendable, CustomStringConvertible {
    case released
    case denied
    case timedOut
    /// The holder's person is asked: by the holder's `request` id (8 hex digits, what
    /// `vault approve` there takes; nil from a holder older than outcome 8), until `until`.
    case waiting(request: String?, until: UInt64)
    case refused(Refusal)
    case deniedByDealer
    /// An emergency request: released at `until` unless the dealer denies it.
    case emergencyWait(until: UInt64)

    public var description: String {
        switch self {
        case .released: "released"
        case .denied: "denied by the holder"
        case .timedOut: "nobody approved in time"
        case .waiting(let request, _): "waiting for the holder's person" + (request.map { " (request \($0))" } ?? "")
        case .refused(let refusal): "refused: \(refusal)"
        case .deniedByDealer: "denied by the secret's dealer"
        case .emergencyWait: "an emergency wait runs"
        }
    }

    /// The encoding's outcome byte.
    package var code: UInt8 {
        switch self {
        case .released: 1
        case .denied: 2
        case .timedOut: 3
        case .waiting(nil, _): 4
        case .refused: 5
        case .deniedByDealer: 6
        case .emergencyWait: 7
        case .waiting: 8
        }
    }

    /// The outcome and its fields, but for a release's prefix and piece (the carrier's).
    package var wire: [UInt8] { encoded }

    var encoded: [UInt8] {
        var w = ByteWriter()
        w.u8(code)
        switch self {
        case .released, .denied, .timedOut, .deniedByDealer: break
        case .waiting(let request, let until):
            if let request { w.raw(Self.requestID(request)) }
            w.u64(until)
        case .refused(let refusal): w.u8(refusal.rawValue)
        case .emergencyWait(let until): w.u64(until)
        }
        return w.bytes
    }

    /// A holder's request id (8 lowercase hex digits, as the holder makes them) as its 4
    /// bytes; anything else as zeros (a holder never makes one).
    static func requestID(_ text: String) -> [UInt8] {
        let digits = Array(text.utf8)
        guard digits.count == 8 else { return [0, 0, 0, 0] }
        func value(_ digit: UInt8) -> UInt8 {
            switch digit {
            case 0x30...0x39: digit - 0x30
            case 0x61...0x66: digit - 0x61 + 10
            default: 0
            }
        }
        return stride(from: 0, to: 8, by: 2).map { value(digits[$0]) << 4 | value(digits[$0 + 1]) }
    }

    /// The length of the fields after the outcome byte `code`, or nil for an unknown one.
    package static func fieldsLength(of code: UInt8) -> Int? {
        switch code {
        case 1, 2, 3, 6: 0
        case 4, 7: 8
        case 5: 1
        case 8: 4 + 8
        default: nil
        }
    }

    /// Reads an answer's fields after its outcome byte; times are ones a keystore can keep.
    package init(code: UInt8, fields: [UInt8]) throws(VaultError) {
        func fail(_ detail: String) -> VaultError { .malformed(what: "the piece answer", detail: detail) }
        guard let length = Self.fieldsLength(of: code) else { throw fail("an unknown outcome \(code)") }
        guard fields.count == length else { throw fail("outcome \(code) has \(fields.count) bytes of fields, not \(length)") }
        func time(_ bytes: ArraySlice<UInt8>) throws(VaultError) -> UInt64 {
            let value = bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            guard value <= UInt64(Int64.max) else { throw fail("a time out of range") }
            return value
        }
        switch code {
        case 1: self = .released
        case 2: self = .denied
        case 3: self = .timedOut
        case 4: self = .waiting(request: nil, until: try time(fields[...]))
        case 5:
            guard let refusal = Refusal(rawValue: fields[0]) else { throw fail("an unknown refusal \(fields[0])") }
            self = .refused(refusal)
        case 6: self = .deniedByDealer
        case 7: self = .emergencyWait(until: try time(fields[...]))
        default: self = .waiting(request: Array(fields[0..<4]).hex, until: try time(fields[4...]))
        }
    }
}
