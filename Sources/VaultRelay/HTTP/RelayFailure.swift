import Foundation
import HTTPTypes

/// A refused request: its HTTP status, a stable code and words for a person. Every one is
/// answered with a JSON body (``VaultRelayProtocol/RelayAPI/Failure``), signed like any
/// other answer.
struct RelayFailure: Error {
    let status: HTTPResponse.Status
    let code: String
    let words: String

    static func unsigned(_ words: String) -> RelayFailure { .init(status: .unauthorized, code: "unsigned", words: words) }
    static func badSignature() -> RelayFailure {
        .init(status: .unauthorized, code: "bad_signature", words: "the request's signature does not verify")
    }
    static func bodyMismatch() -> RelayFailure {
        .init(status: .badRequest, code: "body_mismatch", words: "the body does not match its Vault-Body-SHA256 header")
    }
    static func overQuota(_ words: String) -> RelayFailure {
        .init(status: .init(code: 507, reasonPhrase: "Insufficient Storage"), code: "over_quota", words: words)
    }
    static func replayed() -> RelayFailure { .init(status: .unauthorized, code: "replayed", words: "this request was already made once") }
    static func clockSkew(_ skew: Int64) -> RelayFailure {
        .init(status: .unauthorized, code: "clock_skew",
              words: "the request's time is \(skew) seconds from the relay's clock, more than \(300) allowed")
    }
    static func malformed(_ words: String) -> RelayFailure { .init(status: .badRequest, code: "malformed", words: words) }
    static func tooLarge(_ words: String) -> RelayFailure { .init(status: .contentTooLarge, code: "too_large", words: words) }
    static func notAMember() -> RelayFailure {
        .init(status: .forbidden, code: "not_a_member", words: "the caller is not a member of this group")
    }
    static func unknownGroup() -> RelayFailure { .init(status: .notFound, code: "unknown_group", words: "no such group on this relay") }
    static func notFound() -> RelayFailure {
        .init(status: .notFound, code: "not_found", words: "no such message for the caller, or it expired")
    }
    static func rateLimited() -> RelayFailure {
        .init(status: .tooManyRequests, code: "rate_limited", words: "too many requests; try again in a few seconds")
    }
}
