import Foundation
import VaultCore

/// The signing headers of a request, parsed strictly (Docs/RELAY.md, "Signed requests"):
/// keys, nonces, hashes and signatures in their one canonical base64url spelling and exact
/// length, the time in at most 20 decimal digits. What they sign is checked by the relay;
/// this only reads them, and is what the relay's request fuzz target drives.
public struct SignedHeaders: Equatable, Sendable {
    /// The caller's Ed25519 key.
    public let key: [UInt8]
    /// The request's time, Unix seconds.
    public let time: UInt64
    /// The request's nonce.
    public let nonce: [UInt8]
    /// SHA-256 of the body, as the caller signed it.
    public let bodyHash: [UInt8]
    /// The signature.
    public let signature: [UInt8]

    /// Why the headers cannot be read.
    public enum Problem: Error, Equatable, Sendable {
        /// A header is missing (or the time is not a number).
        case missing(String)
        /// A header is there but not what it must be.
        case malformed(String)

        /// In words, for the refusal.
        public var words: String {
            switch self {
            case .missing(let name) where name == RelayHeader.time: "the request has no valid \(name) header"
            case .missing(let name): "the request has no \(name) header"
            case .malformed(let words): words
            }
        }
    }

    /// Reads the headers through `header`, which returns a header's value by name.
    public init(_ header: (String) -> String?) throws(Problem) {
        func bytes(_ name: String, _ length: Int) throws(Problem) -> [UInt8] {
            guard let text = header(name) else { throw .missing(name) }
            guard let bytes = Base64URL.decode(text, length: length) else { throw .malformed("the \(name) header is not \(length) bytes of base64url") }
            return bytes
        }
        key = try bytes(RelayHeader.key, 32)
        nonce = try bytes(RelayHeader.nonce, RequestSignature.nonceLength)
        bodyHash = try bytes(RelayHeader.bodyHash, 32)
        signature = try bytes(RelayHeader.signature, 64)
        guard let text = header(RelayHeader.time), text.utf8.count <= 20, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
              let time = UInt64(text) else {
            throw .missing(RelayHeader.time)
        }
        self.time = time
    }

    /// Whether any signing header is present: a request that carries none is anonymous
    /// (a share link made by a browser), one that carries some must carry them all.
    public static func present(_ header: (String) -> String?) -> Bool {
        [RelayHeader.key, RelayHeader.signature, RelayHeader.bodyHash, RelayHeader.time].contains { header($0) != nil }
    }
}
