import Foundation
import VaultCore

/// The HTTP headers of vault's signed requests and responses (Docs/RELAY.md, "Signed
/// requests").
public enum RelayHeader {
    /// The caller's Ed25519 key, base64url.
    public static let key = "Vault-Key"
    /// Unix seconds when the request or response was made.
    public static let time = "Vault-Time"
    /// 16 random bytes, base64url: never accepted twice within the time window.
    public static let nonce = "Vault-Nonce"
    /// SHA-256 of the body, base64url (of nothing, for no body).
    public static let bodyHash = "Vault-Body-SHA256"
    /// The Ed25519 signature, base64url.
    public static let signature = "Vault-Signature"
}

/// What a signed request covers. There are no bearer keys: every request is signed by the
/// caller's vault identity over everything that gives it meaning, for one relay, once.
///
///     "vault/v1/relay-request" ‖ 0 ‖ relay's Ed25519 key (32) ‖ method ‖ 0 ‖ path and query ‖ 0
///       ‖ SHA-256(body) (32) ‖ time (8, big-endian) ‖ nonce (16)
///
/// The relay's key makes a request for one relay worthless at another; the time (±5
/// minutes) and the nonce (refused when seen again in the window) make it worthless later.
public enum RequestSignature {
    /// How far a request's time may be from the relay's clock.
    public static let window: UInt64 = 300
    /// Nonces are 16 bytes.
    public static let nonceLength = 16

    /// The signed bytes.
    public static func message(relay: [UInt8], method: String, path: String, bodyHash: [UInt8], time: UInt64, nonce: [UInt8]) -> [UInt8] {
        var bytes = Array("vault/v1/relay-request".utf8) + [0] + relay + Array(method.utf8) + [0] + Array(path.utf8) + [0] + bodyHash
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: time >> UInt64(shift))) }
        return bytes + nonce
    }

    /// The headers that sign a request from `identity` to the relay with key `relay`.
    public static func headers(identity: Identity, relay: [UInt8], method: String, path: String, bodyHash: [UInt8],
                               time: UInt64 = VaultClock.seconds(), nonce: [UInt8] = SecureRandom().bytes(nonceLength))
        -> [(String, String)] {
        let signature = identity.sign(message(relay: relay, method: method, path: path, bodyHash: bodyHash, time: time, nonce: nonce))
        return [(RelayHeader.key, Base64URL.encode(identity.card.signingKey)), (RelayHeader.time, String(time)),
                (RelayHeader.nonce, Base64URL.encode(nonce)), (RelayHeader.bodyHash, Base64URL.encode(bodyHash)),
                (RelayHeader.signature, Base64URL.encode(signature))]
    }
}

/// What a signed response covers: the relay answers for this request, with this status
/// and body, now. A man in the middle without the relay's key cannot make one, and cannot
/// replay one to another request.
///
///     "vault/v1/relay-response" ‖ 0 ‖ relay's Ed25519 key (32) ‖ the request's nonce (16)
///       ‖ status (2) ‖ time (8) ‖ SHA-256(body) (32)
public enum ResponseSignature {
    /// The signed bytes.
    public static func message(relay: [UInt8], requestNonce: [UInt8], status: Int, time: UInt64, bodyHash: [UInt8]) -> [UInt8] {
        var bytes = Array("vault/v1/relay-response".utf8) + [0] + relay + requestNonce + [UInt8(status >> 8 & 0xff), UInt8(status & 0xff)]
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: time >> UInt64(shift))) }
        return bytes + bodyHash
    }
}

/// SHA-256 of some bytes at once.
public func sha256(_ bytes: [UInt8]) -> [UInt8] {
    let hasher = SHA256Hasher()
    bytes.withUnsafeBytes { hasher.update($0) }
    return hasher.finish()
}
