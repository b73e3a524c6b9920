import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import VaultCore
import VaultRelayProtocol

/// A link as its creator keeps it.
public struct CreatedLink: Sendable {
    /// The link, with its fragment: shown to the creator once, never stored.
    public let text: String
    /// The id the relay gave.
    public let id: [UInt8]
    /// The token that deletes it (and shows its views left).
    public let deleteToken: [UInt8]
    /// When the relay forgets it, Unix seconds.
    public let expires: UInt64
    /// The blob's length.
    public let size: UInt64
}

/// Share links from the terminal (Docs/LINKS.md): create on a pinned relay, open any
/// link with the same checks as the page, and, with the delete token, see or delete one.
public enum LinkClient {
    /// The largest blob `open` takes: the relays' own largest, with room.
    public static let largestBlob: UInt64 = 1 << 30

    /// Encrypts `content` under a new link's key into the spool, uploads it to `relay`
    /// (whose answer must be signed by its pinned card) and returns the link. With `signer`,
    /// the request is signed: a relay that lists the signer's card then binds the link by
    /// no per-address quota and allows it its longest lifetime.
    public static func create(_ content: inout some ByteSource, meta: LinkMeta, relay: PinnedRelay, lifetime: UInt64, views: Int,
                              password: SecureBytes?, signer: Identity? = nil, home: VaultHome) async throws -> CreatedLink {
        let fragment = LinkKeys.newFragment(password: password != nil)
        let iterations = password == nil ? 0 : LinkKeys.defaultIterations
        let keys = try LinkKeys(fragment: fragment, password: password, iterations: iterations)
        let path = try Spool(home: home).newPath()
        defer { unlink(path) }
        var length: UInt64 = 0
        do {
            let file = try OutputFile(path: path, shownAs: "the spool")
            try LinkStream.seal(meta: meta, content: &content, key: keys.content) { sealed in
                try file.write(sealed)
                length += UInt64(sealed.count)
            }
            try file.commit()
        }
        let token = SecureRandom().bytes(32)
        let nonce = SecureRandom().bytes(RequestSignature.nonceLength)
        var request = HTTPClientRequest(url: relay.url + "/links")
        request.method = .POST
        if let signer {
            let (_, hash) = try Spool.hash(path)
            for (field, value) in RequestSignature.headers(identity: signer, relay: relay.card.signingKey, method: "POST", path: "/links",
                                                           bodyHash: hash, nonce: nonce) {
                request.headers.add(name: field, value: value)
            }
        } else {
            request.headers.add(name: RelayHeader.nonce, value: Base64URL.encode(nonce))
        }
        request.headers.add(name: LinkAPI.Header.ttl, value: String(lifetime))
        request.headers.add(name: LinkAPI.Header.views, value: String(views))
        request.headers.add(name: LinkAPI.Header.iterations, value: String(iterations))
        request.headers.add(name: LinkAPI.Header.claimHash, value: Base64URL.encode(keys.claim.withUnsafeBytes { sha256(Array($0)) }))
        request.headers.add(name: LinkAPI.Header.deleteHash, value: Base64URL.encode(sha256(token)))
        request.body = try FileChunks.body(path: path, length: length)
        let name = relay.label.value
        let (status, headers, body) = try await RelayConnection.exchange(request, relay: name, deadline: RelayHTTPClient.streamDeadline)
        try RelayConnection.verify(headers: headers, status: status, body: body, nonce: nonce, card: relay.card, relay: name)
        guard status == 201 else { throw RelayConnection.failure(relay: name, status: status, body: body) }
        guard let created = try? JSONDecoder().decode(LinkAPI.Created.self, from: Data(body)),
              let id = Base64URL.decode(created.id, length: LinkAPI.idLength) else {
            throw RelayError(relay: name, code: "malformed", words: "its answer is not a link")
        }
        let address = LinkAddress(base: relay.url, id: id, fragment: fragment)
        return CreatedLink(text: address.text, id: id, deleteToken: token, expires: created.expires, size: length)
    }

    /// `GET …/status`: whether the link is there and needs a password. Consumes nothing.
    public static func status(_ link: LinkAddress) async throws -> LinkAPI.Status {
        let (status, _, body) = try await RelayConnection.exchange(HTTPClientRequest(url: path(link, "/status")), relay: link.base)
        guard status == 200 else { throw failure(link, status: status, body: body) }
        guard let answer = try? JSONDecoder().decode(LinkAPI.Status.self, from: Data(body)) else {
            throw RelayError(relay: link.base, code: "malformed", words: "its status answer is not valid")
        }
        return answer
    }

    /// Claims one view of `link` and opens it: `metaReady`, then the content, each chunk
    /// authenticated; the whole is checked before this returns, so a caller that holds the
    /// content aside until then shows nothing of a damaged link. Returns what it held and
    /// the views left. A wrong password costs no view.
    public static func open(_ link: LinkAddress, password: (LinkAPI.Status) throws -> SecureBytes?,
                            metaReady: @escaping (LinkMeta) throws -> Void,
                            content: @escaping (UnsafeRawBufferPointer) throws -> Void) async throws -> (meta: LinkMeta, viewsLeft: Int) {
        let state = try await status(link)
        guard state.password == link.needsPassword else {
            throw VaultError.malformed(what: "the link", detail: "its key is incomplete or damaged")
        }
        let keys = try LinkKeys(fragment: link.fragment, password: try password(state), iterations: state.iterations ?? 0)
        var request = HTTPClientRequest(url: path(link, "/claim"))
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        let claim = LinkAPI.Claim(claim: keys.claim.withUnsafeBytes { Base64URL.encode(Array($0)) })
        request.body = .bytes(Array(try JSONEncoder().encode(claim)))
        let response = try await RelayHTTPClient.execute(request, relay: link.base, deadline: RelayHTTPClient.streamDeadline)
        let status = Int(response.status.code)
        guard status == 200 else {
            var body: [UInt8] = []
            for try await buffer in response.body where body.count < 1 << 16 { body += buffer.readableBytesView }
            throw failure(link, status: status, body: body)
        }
        guard let length = response.headers.first(name: "Content-Length").flatMap({ UInt64($0) }), length <= largestBlob else {
            throw RelayError(relay: link.base, code: "malformed", words: "its answer has no length, or is over \(ByteCount.limit(largestBlob))")
        }
        let left = response.headers.first(name: LinkAPI.Header.viewsLeft).flatMap { Int($0) } ?? 0
        let opener = try LinkOpener(key: keys.content, blobLength: length, metaReady: metaReady, content: content)
        var received: UInt64 = 0
        for try await buffer in response.body {
            received += UInt64(buffer.readableBytes)
            guard received <= length else { throw VaultError.damaged(what: "the link", detail: "bytes follow its end") }
            try buffer.withUnsafeReadableBytes { try opener.take($0) }
        }
        return (try opener.finish(), left)
    }

    /// Views left and expiry, for the holder of the delete token; nil when the link is gone.
    public static func info(base: String, id: [UInt8], token: [UInt8]) async throws -> LinkAPI.Info? {
        var request = HTTPClientRequest(url: base + "/links/" + Base64URL.encode(id))
        request.headers.add(name: LinkAPI.Header.deleteToken, value: Base64URL.encode(token))
        let (status, _, body) = try await RelayConnection.exchange(request, relay: base)
        if status == 404 { return nil }
        guard status == 200, let info = try? JSONDecoder().decode(LinkAPI.Info.self, from: Data(body)) else {
            throw RelayConnection.failure(relay: base, status: status, body: body)
        }
        return info
    }

    /// Deletes a link with its token; false when it was already gone.
    public static func delete(base: String, id: [UInt8], token: [UInt8]) async throws -> Bool {
        var request = HTTPClientRequest(url: base + "/links/" + Base64URL.encode(id))
        request.method = .DELETE
        request.headers.add(name: LinkAPI.Header.deleteToken, value: Base64URL.encode(token))
        let (status, _, body) = try await RelayConnection.exchange(request, relay: base)
        if status == 404 { return false }
        guard status == 204 else { throw RelayConnection.failure(relay: base, status: status, body: body) }
        return true
    }

    private static func path(_ link: LinkAddress, _ suffix: String) -> String {
        link.base + "/links/" + Base64URL.encode(link.id) + suffix
    }

    /// A refused claim or status in the words of Docs/LINKS.md.
    private static func failure(_ link: LinkAddress, status: Int, body: [UInt8]) -> Error {
        let code = (try? JSONDecoder().decode(RelayAPI.Failure.self, from: Data(body)))?.code
        switch code {
        case "gone": return LinkFailure.gone
        case "wrong_claim": return link.needsPassword ? LinkFailure.wrongPassword : LinkFailure.wrongKey
        default: return RelayConnection.failure(relay: link.base, status: status, body: body)
        }
    }
}

/// Why a link did not open, in the page's words.
public enum LinkFailure: Error, UserFacingError {
    case gone, wrongPassword, wrongKey

    public var description: String {
        switch self {
        case .gone: "this link has expired, was used up, or never existed"
        case .wrongPassword: "the password is wrong (no view was used)"
        case .wrongKey: "the link's key is wrong (no view was used); was it copied whole?"
        }
    }
}
