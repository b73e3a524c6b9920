import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import VaultCore
import VaultRelayProtocol

/// What went wrong with one relay, in words, naming the relay.
public struct RelayError: Error, UserFacingError {
    /// The relay's name.
    public let relay: String
    /// The relay's stable code (`not_a_member`, …), or `unreachable` (no connection),
    /// `interrupted` (a connection cut short, or an answer that stalled), `forged`,
    /// `malformed`, `tls` or `given_up` (``RelayOutages``) for what the client found itself.
    public let code: String
    /// What happened.
    public let words: String

    public var description: String { "relay \(relay): \(words)" }

    /// A failure at `relay`.
    public init(relay: String, code: String, words: String) {
        self.relay = relay
        self.code = code
        self.words = words
    }
}

/// Fewer relays of a group stored a message than it needs; says which did not, and why.
public struct RelayShortfall: Error, UserFacingError {
    /// The group's name.
    public let group: String
    /// How many stored it, how many must, and each refusal.
    public let words: String

    public var description: String { "the relays of \(group): \(words)" }
}

/// Signed requests to one pinned relay, and checks on its answers: every answer must be
/// signed by the pinned card, over this request's nonce, its status and its body, or it
/// is refused as forged (a man in the middle without the relay's key).
public struct RelayConnection: Sendable {
    /// The relay's name here.
    public let name: String
    /// Its base URL.
    public let url: String
    /// The card its answers must be signed by.
    public let card: KeyCard
    private let identity: Identity
    /// The pass this connection is part of, whose relays that could not be reached or
    /// stalled are asked nothing more in it (``RelayOutages``); nil outside one.
    private var outages: RelayOutages?

    /// A connection to a relay as pinned (or as named by an accepted group record).
    public init(name: String, url: String, card: KeyCard, identity: Identity) {
        self.name = name
        self.url = url
        self.card = card
        self.identity = identity
    }

    /// This connection, as part of a pass that gives up on a relay at its first outage.
    func sharing(_ outages: RelayOutages) -> RelayConnection {
        var connection = self
        connection.outages = outages
        return connection
    }

    /// A connection to one of a group's relays, as its record names it.
    public init(_ relay: GroupRecord.Relay, identity: Identity) {
        self.init(name: relay.name.value, url: relay.url, card: relay.card, identity: identity)
    }

    /// `GET /card` from a relay not yet pinned: its card and limits, once the answer is
    /// signed by that card over a fresh nonce. Whether the card is the right one is the
    /// user's to confirm, by fingerprint.
    public static func fetchCard(url: String) async throws -> (info: RelayAPI.Card, card: KeyCard) {
        let base = try RelayURL.check(url)
        let nonce = SecureRandom().bytes(RequestSignature.nonceLength)
        var request = HTTPClientRequest(url: base + "/card")
        request.headers.add(name: RelayHeader.nonce, value: Base64URL.encode(nonce))
        let name = base
        let (status, headers, body) = try await Self.exchange(request, relay: name, limit: 1 << 16)
        guard status == 200 else { throw Self.failure(relay: name, status: status, body: body) }
        guard let info = try? JSONDecoder().decode(RelayAPI.Card.self, from: Data(body)), let card = try? KeyCard(text: info.card) else {
            throw RelayError(relay: name, code: "malformed", words: "its card is not valid")
        }
        try Self.verify(headers: headers, status: status, body: body, nonce: nonce, card: card, relay: name)
        return (info, card)
    }

    /// A signed request with a small body; returns the status and the checked body. `waiting`
    /// for a request the relay may hold (a waiting list), within `deadline`.
    package func send(_ method: HTTPMethod, _ path: String, body: [UInt8] = [], limit: Int = 1 << 20,
              deadline: TimeAmount = RelayHTTPClient.smallDeadline, waiting: Bool = false) async throws -> (Int, [UInt8]) {
        if let outages, outages.contains(card) { throw RelayOutages.givenUp(name) }
        let nonce = SecureRandom().bytes(RequestSignature.nonceLength)
        var request = HTTPClientRequest(url: url + path)
        request.method = method
        for (field, value) in RequestSignature.headers(identity: identity, relay: card.signingKey, method: method.rawValue, path: path,
                                                       bodyHash: sha256(body), nonce: nonce) {
            request.headers.add(name: field, value: value)
        }
        if !body.isEmpty { request.body = .bytes(body) }
        let (status, headers, answer): (Int, HTTPHeaders, [UInt8])
        do {
            (status, headers, answer) = try await Self.exchange(request, relay: name, limit: limit, deadline: deadline, waiting: waiting)
        } catch {
            outages?.note(error, of: card)
            throw error
        }
        try Self.verify(headers: headers, status: status, body: answer, nonce: nonce, card: card, relay: name)
        return (status, answer)
    }

    /// Uploads `length` bytes of the file at `path` as the body of a signed PUT: streamed,
    /// or as bytes when it is at most one chunk (``FileChunks/body(path:length:)``).
    func upload(_ path: String, to target: String, length: UInt64, bodyHash: [UInt8]) async throws -> (Int, [UInt8]) {
        let nonce = SecureRandom().bytes(RequestSignature.nonceLength)
        var request = HTTPClientRequest(url: url + target)
        request.method = .PUT
        for (field, value) in RequestSignature.headers(identity: identity, relay: card.signingKey, method: "PUT", path: target,
                                                       bodyHash: bodyHash, nonce: nonce) {
            request.headers.add(name: field, value: value)
        }
        request.body = try FileChunks.body(path: path, length: length)
        let (status, headers, answer) = try await Self.exchange(request, relay: name, limit: 1 << 16,
                                                                deadline: RelayHTTPClient.streamDeadline)
        try Self.verify(headers: headers, status: status, body: answer, nonce: nonce, card: card, relay: name)
        return (status, answer)
    }

    /// Streams a signed GET's body to `take`, then checks the answer's signature over the
    /// body's hash. Returns the status; a body other than 200's is refused in words. `what`
    /// names what was served (known once its first bytes came), for the error that says
    /// its bytes are not the ones the relay stored.
    func download(_ path: String, limit: UInt64, what: () -> String = { "share" }, take: (ByteBuffer) throws -> Void) async throws {
        let nonce = SecureRandom().bytes(RequestSignature.nonceLength)
        var request = HTTPClientRequest(url: url + path)
        for (field, value) in RequestSignature.headers(identity: identity, relay: card.signingKey, method: "GET", path: path,
                                                       bodyHash: sha256([]), nonce: nonce) {
            request.headers.add(name: field, value: value)
        }
        let response = try await RelayHTTPClient.execute(request, relay: name, deadline: RelayHTTPClient.streamDeadline)
        let status = Int(response.status.code)
        if status != 200 {
            var body: [UInt8] = []
            for try await buffer in response.body where body.count < 1 << 16 { body += buffer.readableBytesView }
            try Self.verify(headers: response.headers, status: status, body: body, nonce: nonce, card: card, relay: name)
            throw Self.failure(relay: name, status: status, body: body)
        }
        let hasher = SHA256Hasher()
        var received: UInt64 = 0
        for try await buffer in response.body {
            received += UInt64(buffer.readableBytes)
            guard received <= limit else { throw RelayError(relay: name, code: "malformed", words: "it sent more than the message's length") }
            buffer.withUnsafeReadableBytes { hasher.update($0) }
            try take(buffer)
        }
        // The relay signed the hash it took when the share was stored. Signature first: an
        // answer it did not sign is a man in the middle's; a signed answer whose bytes
        // differ is the relay serving other bytes than it stored (damaged or altered).
        guard let claimed = response.headers.first(name: RelayHeader.bodyHash).flatMap({ Base64URL.decode($0, length: 32) }) else {
            throw RelayError(relay: name, code: "forged", words: "its answer is not signed by its pinned card (a man in the middle?)")
        }
        try Self.verify(headers: response.headers, status: status, bodyHash: claimed, nonce: nonce, card: card, relay: name)
        guard hasher.finish() == claimed else {
            throw RelayError(relay: name, code: "forged", words: "it served a damaged or forged \(what()): its bytes differ from those it stored and signed for")
        }
    }

    /// Sends `request` and reads the whole answer, at most `limit` bytes; checks nothing.
    static func exchange(_ request: HTTPClientRequest, relay: String, limit: Int = 1 << 20,
                         deadline: TimeAmount = RelayHTTPClient.smallDeadline, waiting: Bool = false) async throws -> (Int, HTTPHeaders, [UInt8]) {
        let response = try await RelayHTTPClient.execute(request, relay: relay, deadline: deadline, waiting: waiting)
        var body: [UInt8] = []
        do {
            for try await buffer in response.body {
                guard body.count + buffer.readableBytes <= limit else {
                    throw RelayError(relay: relay, code: "malformed", words: "its answer is longer than \(ByteCount.limit(UInt64(limit))))")
                }
                body += buffer.readableBytesView
            }
        } catch let error as RelayError {
            throw error
        } catch let error as CancellationError {
            throw error
        } catch {
            // Cut short, or stalled, after its answer began.
            throw RelayError(relay: relay, code: "interrupted", words: "cannot reach it: \(ConnectionFailure.words(for: error))")
        }
        return (Int(response.status.code), response.headers, body)
    }

    static func verify(headers: HTTPHeaders, status: Int, body: [UInt8], nonce: [UInt8], card: KeyCard, relay: String) throws {
        guard let claimed = headers.first(name: RelayHeader.bodyHash).flatMap({ Base64URL.decode($0, length: 32) }), claimed == sha256(body) else {
            throw RelayError(relay: relay, code: "forged", words: "its answer is not signed by its pinned card (a man in the middle?)")
        }
        try verify(headers: headers, status: status, bodyHash: claimed, nonce: nonce, card: card, relay: relay)
    }

    private static func verify(headers: HTTPHeaders, status: Int, bodyHash: [UInt8], nonce: [UInt8], card: KeyCard, relay: String) throws {
        guard let signature = headers.first(name: RelayHeader.signature).flatMap({ Base64URL.decode($0, length: 64) }),
              let time = headers.first(name: RelayHeader.time).flatMap({ UInt64($0) }),
              headers.first(name: RelayHeader.bodyHash).flatMap({ Base64URL.decode($0, length: 32) }) == bodyHash,
              card.verify(signature: signature, of: ResponseSignature.message(relay: card.signingKey, requestNonce: nonce, status: status,
                                                                             time: time, bodyHash: bodyHash)) else {
            throw RelayError(relay: relay, code: "forged", words: "its answer is not signed by its pinned card (a man in the middle?)")
        }
    }

    package static func failure(relay: String, status: Int, body: [UInt8]) -> RelayError {
        if let failure = try? JSONDecoder().decode(RelayAPI.Failure.self, from: Data(body)) {
            return RelayError(relay: relay, code: failure.code, words: TerminalText.escaped(failure.error))
        }
        return RelayError(relay: relay, code: "http_\(status)", words: "it answered HTTP \(status)")
    }
}

/// A file's bytes as 64 KiB buffers, for a streamed upload.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let path: String

    /// The size of a chunk read at a time.
    static let chunk: UInt64 = 1 << 16

    /// The body of an upload of the `length` bytes of the file at `path`: streamed, or the
    /// whole file as bytes when it is at most one chunk.
    ///
    /// A small body goes as bytes, not as a stream: AsyncHTTPClient pulls a streamed body from a task of
    /// its own on Swift's shared pool, so a host program that keeps that pool busy (an app
    /// embedding this library, or a test run of synchronous tests) held even a request of
    /// a few hundred bytes until the relay gave up on its body. Most holder and object
    /// messages and many share links are this small; memory stays bounded by a chunk an
    /// upload.
    static func body(path: String, length: UInt64) throws -> HTTPClientRequest.Body {
        length <= chunk ? .bytes(try whole(path: path, length: length)) : .stream(FileChunks(path: path), length: .known(Int64(length)))
    }

    /// The whole of a file of at most one chunk, which must be `length` bytes long.
    private static func whole(path: String, length: UInt64) throws -> ByteBuffer {
        var source = try FileSource(path: path)
        // A file of another size is not the one hashed; one that shrinks while read, the
        // source refuses itself.
        guard source.size == length else { throw VaultError.fileSystem(path: path, reason: "it changed size while it was being read") }
        return ByteBuffer(bytes: try source.readFully(Int(length)))
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        let source: FileSource?
        let path: String

        mutating func next() async throws -> ByteBuffer? {
            guard let source else { throw VaultError.fileSystem(path: path, reason: "cannot open it") }
            var buffer = ByteBuffer()
            buffer.reserveCapacity(Int(FileChunks.chunk))
            let count = try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: Int(FileChunks.chunk)) { pointer in
                try source.read(into: UnsafeMutableRawBufferPointer(rebasing: pointer[..<Int(FileChunks.chunk)]))
            }
            return count == 0 ? nil : buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(source: try? FileSource(path: path), path: path) }
}
