import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import VaultCore
import VaultRelayProtocol

/// A caller whose signed request checked out.
struct Caller: Sendable {
    /// Its Ed25519 key.
    let key: [UInt8]
    /// The request's nonce, which the answer's signature covers.
    let nonce: [UInt8]
    /// The body's SHA-256 as the caller signed it.
    let bodyHash: [UInt8]
}

/// The relay's state and its answers to each request (Docs/RELAY.md, "API").
///
/// A relay is untrusted by design: it stores what members of a group address to each
/// other and forgets it, and everything it holds is signed by its sender and sealed to its
/// recipients. What it checks is what keeps it from being a free store for anyone: every
/// request is signed by a member, once, and every message fits the group's limits.
final class Relay: Sendable {
    let identity: Identity
    let store: any RelayStore
    let configuration: RelayConfiguration
    /// Requests of `GET /v1/messages?wait=S` waiting for a message.
    let waiters: MessageWaiters
    /// Group records, parsed once a version.
    let groupCache = GroupCache()
    private let byAddress: RateLimiter
    private let byKey: RateLimiter
    private let linkCreations: RateLimiter
    /// The key of client addresses' HMACs, which the rate limiters' tables and the links'
    /// per-address quotas hold instead of addresses. It lives in the store, so every process
    /// sharing it counts an address alike. Only read after it is made, so threads may share it.
    nonisolated(unsafe) private let addressSecret: SecureBytes

    init(identity: Identity, store: any RelayStore, configuration: RelayConfiguration, waiters: MessageWaiters, addressSecret: SecureBytes) {
        self.identity = identity
        self.store = store
        self.configuration = configuration
        self.waiters = waiters
        self.addressSecret = addressSecret
        byAddress = RateLimiter(burst: Int(configuration.addressRequestsPerSecond * 10), perSecond: configuration.addressRequestsPerSecond)
        byKey = RateLimiter(burst: Int(configuration.requestsPerSecond * 10), perSecond: configuration.requestsPerSecond)
        linkCreations = RateLimiter(burst: max(1, Int(configuration.linksPerMinute)), perSecond: configuration.linksPerMinute / 60)
    }

    /// Spends one request of the client address's allowance.
    func allowAddress(_ context: RelayContext) -> Bool { byAddress.allow(addressKey(context)) }

    /// Spends one link creation of the client address's allowance.
    func allowLinkCreation(_ context: RelayContext) -> Bool { linkCreations.allow(addressKey(context)) }

    /// The HMAC of the client's address (IPv4, or its IPv6 /64), 16 bytes.
    func addressKey(_ context: RelayContext) -> [UInt8] {
        Array(KeyDerivation.hmacSHA256(key: addressSecret, context.addressKey).prefix(16))
    }

    /// Whether `key` may own groups here (Docs/RELAY.md, "Operator policy").
    func mayOwnGroups(_ key: [UInt8]) async throws -> Bool {
        switch configuration.ownerPolicy {
        case .anyone: true
        case .listed: try await isListed(key)
        }
    }

    /// Whether `key` is one of the operator's cards (`--owners`) or redeemed an invite.
    func isListed(_ key: [UInt8]) async throws -> Bool {
        if configuration.ownerCards.contains(key) { return true }
        return try await store.isInvitedOwner(key)
    }

    static func now() -> UInt64 { VaultClock.seconds() }

    // MARK: Answers

    /// An answer, signed over the request's nonce when there is one.
    func answer(_ status: HTTPResponse.Status, bytes: [UInt8], contentType: String, nonce: [UInt8]?) -> Response {
        var headers = signedHeaders(status: status, bodyHash: sha256(bytes), nonce: nonce)
        headers[.contentType] = contentType
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    func answer(json: some Encodable, status: HTTPResponse.Status = .ok, nonce: [UInt8]?) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let bytes = (try? encoder.encode(json)).map { [UInt8]($0) } ?? Array("{}".utf8)
        return answer(status, bytes: bytes, contentType: "application/json", nonce: nonce)
    }

    func answer(_ failure: RelayFailure, nonce: [UInt8]?) -> Response {
        answer(json: RelayAPI.Failure(error: failure.words, code: failure.code), status: failure.status, nonce: nonce)
    }

    /// The headers that sign an answer: time, body hash and signature. No-store, so no
    /// cache between the relay and its client keeps a copy past its TTL.
    func signedHeaders(status: HTTPResponse.Status, bodyHash: [UInt8], nonce: [UInt8]?) -> HTTPFields {
        var headers = HTTPFields()
        headers[.cacheControl] = "no-store"
        guard let nonce else { return headers }
        let time = Self.now()
        let signature = identity.sign(ResponseSignature.message(relay: identity.card.signingKey, requestNonce: nonce,
                                                               status: status.code, time: time, bodyHash: bodyHash))
        headers[Self.field(RelayHeader.time)] = String(time)
        headers[Self.field(RelayHeader.bodyHash)] = Base64URL.encode(bodyHash)
        headers[Self.field(RelayHeader.signature)] = Base64URL.encode(signature)
        return headers
    }

    static func field(_ name: String) -> HTTPField.Name { HTTPField.Name(name)! }

    // MARK: Authentication

    /// Runs `body` for a signed request: the address's rate limit first (before any work),
    /// then the signature, the time, the nonce and the caller's own rate limit. Every
    /// refusal is answered in JSON; nothing is logged.
    func signed(_ request: Request, _ context: RelayContext, _ body: (Caller) async throws -> Response) async -> Response {
        let unsignedNonce = request.headers[Self.field(RelayHeader.nonce)].flatMap { Base64URL.decode($0, length: RequestSignature.nonceLength) }
        guard allowAddress(context) else { return answer(.rateLimited(), nonce: unsignedNonce) }
        let caller: Caller
        do {
            caller = try await authenticate(request)
        } catch let failure as RelayFailure {
            return answer(failure, nonce: unsignedNonce)
        } catch {
            return answer(RelayFailure(status: .serviceUnavailable, code: "store", words: "the relay's store failed"), nonce: unsignedNonce)
        }
        guard byKey.allow(caller.key) else { return answer(.rateLimited(), nonce: caller.nonce) }
        do {
            return try await body(caller)
        } catch let failure as RelayFailure {
            return answer(failure, nonce: caller.nonce)
        } catch {
            return answer(RelayFailure(status: .serviceUnavailable, code: "store", words: "the relay's store failed"), nonce: caller.nonce)
        }
    }

    func authenticate(_ request: Request) async throws -> Caller {
        let headers: SignedHeaders
        do {
            headers = try SignedHeaders { request.headers[Self.field($0)] }
        } catch {
            switch error {
            case .missing: throw RelayFailure.unsigned(error.words)
            case .malformed: throw RelayFailure.malformed(error.words)
            }
        }
        let (key, nonce, bodyHash, signature, time) = (headers.key, headers.nonce, headers.bodyHash, headers.signature, headers.time)
        let now = Self.now()
        // The distance in unsigned arithmetic: `abs(Int64(bitPattern: time &- now))` trapped on
        // Int64.min, so one unsigned request with Vault-Time = now + 2^63 stopped the relay
        // (RelayAbuseTests.clockSkewIsRefused).
        let distance = time >= now ? time - now : now - time
        guard distance <= RequestSignature.window else {
            throw RelayFailure.clockSkew(time >= now ? Int64(clamping: distance) : -Int64(clamping: distance))
        }
        let message = RequestSignature.message(relay: identity.card.signingKey, method: request.method.rawValue,
                                               path: request.head.path ?? "", bodyHash: bodyHash, time: time, nonce: nonce)
        guard KeyCard.verify(signature: signature, of: message, signingKey: key) else { throw RelayFailure.badSignature() }
        // Kept past the window's far edge, so a request is never accepted twice while its
        // time would still pass.
        guard try await store.remember(nonce: nonce, expires: max(now, time) + 2 * RequestSignature.window) else {
            throw RelayFailure.replayed()
        }
        return Caller(key: key, nonce: nonce, bodyHash: bodyHash)
    }

    /// The whole body of a small request, checked against the hash its caller signed.
    func smallBody(_ request: Request, caller: Caller, limit: Int) async throws -> [UInt8] {
        var bytes: [UInt8] = []
        for try await buffer in request.body {
            guard bytes.count + buffer.readableBytes <= limit else { throw RelayFailure.tooLarge("the body is over \(ByteCount.limit(UInt64(limit)))") }
            bytes += buffer.readableBytesView
        }
        guard sha256(bytes) == caller.bodyHash else { throw RelayFailure.bodyMismatch() }
        return bytes
    }

    /// A small JSON body of type `T`, checked against the hash its caller signed.
    func jsonBody<T: Decodable>(_ request: Request, caller: Caller, as type: T.Type) async throws -> T {
        let bytes = try await smallBody(request, caller: caller, limit: RelayAPI.maximumJSONBody)
        guard let value = try? JSONDecoder().decode(T.self, from: Data(bytes)) else {
            throw RelayFailure.malformed("the body is not the JSON this route takes")
        }
        return value
    }
}
