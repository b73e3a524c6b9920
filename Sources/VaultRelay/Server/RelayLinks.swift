import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import VaultCore
import VaultRelayProtocol

/// Share links on a relay (Docs/LINKS.md): anyone may store a blob for a while and a number
/// of views; whoever holds the link's fragment may claim a view; whoever holds the delete
/// token may delete it. The relay never sees the fragment: it stores ciphertext, the hash
/// of the claim secret and the hash of the delete token.
///
/// What keeps a link from being burnt by a previewer is that nothing a plain GET reaches
/// consumes a view: the page and `status` are free, and a view is taken only by a POST
/// carrying the claim secret, which only the fragment derives.
extension Relay {
    /// Runs a link request: the client address's rate limit first, then `body`; refusals
    /// in JSON, signed when the request carried a nonce (vault's client), plain otherwise
    /// (a browser, which cannot check a signature anyway).
    func unsigned(_ request: Request, _ context: RelayContext, _ body: () async throws -> Response) async -> Response {
        let nonce = request.headers[Self.field(RelayHeader.nonce)].flatMap { Base64URL.decode($0, length: RequestSignature.nonceLength) }
        guard allowAddress(context) else { return answer(.rateLimited(), nonce: nonce) }
        do {
            return try await body()
        } catch let failure as RelayFailure {
            return answer(failure, nonce: nonce)
        } catch {
            return answer(RelayFailure(status: .serviceUnavailable, code: "store", words: "the relay's store failed"), nonce: nonce)
        }
    }

    /// `POST /links`: a blob, streamed into the store 64 KiB at a time; the relay makes the
    /// id (128 random bits), so no client can choose or guess one.
    ///
    /// Anonymous links (unsigned, or signed by a card the operator does not list) count
    /// against their client address's quota (IPv6 by /64) and live at most
    /// `anonymousLinkTTL`, so a few large links from one address cannot fill the links'
    /// quota for a week (M5). A request signed by a listed card is bound by neither; its
    /// body hash is checked at the end, as a share's is.
    func createLink(_ request: Request, _ context: RelayContext) async throws -> Response {
        guard allowLinkCreation(context) else { throw RelayFailure.rateLimited() }
        let nonce = request.headers[Self.field(RelayHeader.nonce)].flatMap { Base64URL.decode($0, length: RequestSignature.nonceLength) }
        var signer: Caller?
        if SignedHeaders.present({ request.headers[Self.field($0)] }) {
            let caller = try await authenticate(request)
            if try await isListed(caller.key) { signer = caller }
        }
        guard signer != nil || configuration.linkMakers == .anyone else {
            throw RelayFailure(status: .forbidden, code: "signature_required",
                               words: "this relay makes links only for cards its operator lists (vault link create --signed, by a listed card)")
        }
        func header(_ name: String) throws(RelayFailure) -> String {
            guard let value = request.headers[Self.field(name)] else { throw .malformed("the request has no \(name) header") }
            return value
        }
        let limit = configuration.maximumLink
        guard let length = request.headers[.contentLength].flatMap({ UInt64($0) }) else {
            throw RelayFailure(status: .lengthRequired, code: "length_required", words: "a link's body needs a Content-Length")
        }
        guard length <= limit else { throw RelayFailure.tooLarge("a link is at most \(ByteCount.limit(limit)) on this relay") }
        guard LinkStream.isValidBlobLength(length) else { throw RelayFailure.malformed("the body is not a link's content: impossible length") }
        let longest = signer == nil ? min(configuration.anonymousLinkTTL, configuration.maximumTTL) : configuration.maximumTTL
        guard let ttl = UInt64(try header(LinkAPI.Header.ttl)), ttl >= 1, ttl <= longest else {
            throw RelayFailure.malformed("this relay keeps \(signer == nil ? "anonymous " : "")links at most \(DurationText.text(longest)) (\(LinkAPI.Header.ttl) is 1 to \(longest) seconds)")
        }
        guard let views = Int(try header(LinkAPI.Header.views)), (1...LinkAPI.maximumViews).contains(views) else {
            throw RelayFailure.malformed("\(LinkAPI.Header.views) is 1 to \(LinkAPI.maximumViews)")
        }
        guard let iterations = Int(try header(LinkAPI.Header.iterations)),
              iterations == 0 || (LinkKeys.minimumIterations...LinkKeys.maximumIterations).contains(iterations) else {
            throw RelayFailure.malformed("\(LinkAPI.Header.iterations) is 0 or \(LinkKeys.minimumIterations) to \(LinkKeys.maximumIterations)")
        }
        guard let claimHash = Base64URL.decode(try header(LinkAPI.Header.claimHash), length: 32),
              let deleteHash = Base64URL.decode(try header(LinkAPI.Header.deleteHash), length: 32) else {
            throw RelayFailure.malformed("the claim and delete hashes are 32 bytes of base64url")
        }
        let id = SecureRandom().bytes(LinkAPI.idLength)
        let now = Self.now()
        let link = NewLink(id: id, size: length, expires: now + ttl, views: views, iterations: iterations, claimHash: claimHash,
                           deleteHash: deleteHash, created: now, source: signer == nil ? addressKey(context) : nil)
        let perSource = SourceQuota(bytes: configuration.linkQuotaPerAddress, count: configuration.linksPerAddress)
        let row: Int64
        switch try await store.begin(link: link, quota: configuration.linkQuota, perSource: perSource, now: now) {
        case .started(let started): row = started
        case .overQuota: throw RelayFailure.overQuota("the relay holds as many links as it may; try again later")
        case .overSourceQuota:
            throw RelayFailure.overQuota("this address holds as many links as it may here (\(configuration.linksPerAddress) links, "
                                         + "\(ByteCount.limit(configuration.linkQuotaPerAddress))); try again when some expire")
        }
        let hasher = SHA256Hasher()
        do {
            var pending: [UInt8] = []
            var chunks = 0
            var received: UInt64 = 0
            var header: [UInt8] = []
            for try await buffer in request.body {
                received += UInt64(buffer.readableBytes)
                guard received <= length else { throw RelayFailure.malformed("the body is longer than its Content-Length") }
                buffer.withUnsafeReadableBytes { hasher.update($0) }
                pending += buffer.readableBytesView
                if header.count < LinkStream.header.count {
                    header = Array(pending.prefix(LinkStream.header.count))
                    guard LinkStream.header.starts(with: header) else { throw RelayFailure.malformed("the body is not a link's content") }
                }
                while pending.count >= RelayStoreLimits.chunk {
                    try await store.append(linkChunk: Array(pending[..<RelayStoreLimits.chunk]), index: chunks, to: row)
                    pending.removeFirst(RelayStoreLimits.chunk)
                    chunks += 1
                }
            }
            guard received == length else { throw RelayFailure.malformed("the body is shorter than its Content-Length") }
            if let signer, hasher.finish() != signer.bodyHash { throw RelayFailure.bodyMismatch() }
            if !pending.isEmpty { try await store.append(linkChunk: pending, index: chunks, to: row) }
            try await store.finish(link: row)
        } catch {
            try? await store.delete(link: row)
            throw error
        }
        return answer(json: LinkAPI.Created(id: Base64URL.encode(id), expires: link.expires), status: .created, nonce: nonce)
    }

    /// `GET /links/ID/status`: whether the link is there and needs a password, its views
    /// left and its expiry, which the page shows before Reveal. Never consumes a view, and
    /// says nothing else (not its size). Whoever holds the id learns these two numbers,
    /// as its reader needs to before deciding to spend a view (Docs/LINKS.md, "Threat model").
    func linkStatus(id: [UInt8], nonce: [UInt8]?) async throws -> Response {
        guard let link = try await store.link(id: id, now: Self.now()) else { throw RelayFailure.gone() }
        return answer(json: LinkAPI.Status(password: link.iterations > 0, iterations: link.iterations > 0 ? link.iterations : nil,
                                           views: link.views, expires: link.expires), nonce: nonce)
    }

    /// `POST /links/ID/claim`: one view, for the claim secret. A wrong secret costs no view
    /// but spends the link's own allowance of attempts (``link(_:holder:of:wrong:)``), so a
    /// password cannot be guessed online faster than that, from any number of addresses or
    /// relay processes.
    func claimLink(_ request: Request, id: [UInt8], nonce: [UInt8]?) async throws -> Response {
        var body: [UInt8] = []
        for try await buffer in request.body {
            guard body.count + buffer.readableBytes <= 1024 else { throw RelayFailure.tooLarge("a claim is at most 1024 bytes") }
            body += buffer.readableBytesView
        }
        guard let claim = try? JSONDecoder().decode(LinkAPI.Claim.self, from: Data(body)),
              let secret = Base64URL.decode(claim.claim, length: 32) else {
            throw RelayFailure.malformed("the body is not {\"claim\": 32 bytes of base64url}")
        }
        let link = try await link(id, holder: secret, of: \.claimHash,
                                  wrong: RelayFailure(status: .forbidden, code: "wrong_claim", words: "the link's key or password is wrong"))
        guard let left = try await store.takeView(link: link.row, now: Self.now()) else { throw RelayFailure.gone() }
        var headers = signedHeaders(status: .ok, bodyHash: [], nonce: nil)
        headers[.contentType] = "application/octet-stream"
        headers[Self.field(LinkAPI.Header.viewsLeft)] = String(left)
        let store = self.store
        return Response(status: .ok, headers: headers, body: ResponseBody(contentLength: Int(link.size)) { writer in
            // The last view deletes the link once served, or when the reader goes away
            // part way: the view was taken either way.
            do {
                var index = 0
                while let chunk = try await store.linkChunk(index, of: link.row) {
                    try await writer.write(ByteBuffer(bytes: chunk))
                    index += 1
                }
                if left == 0 { try await store.delete(link: link.row) }
            } catch {
                if left == 0 { try? await store.delete(link: link.row) }
                throw error
            }
            try await writer.finish(nil)
        })
    }

    /// `DELETE /links/ID` with the delete token.
    func deleteLink(_ request: Request, id: [UInt8], nonce: [UInt8]?) async throws -> Response {
        let link = try await owned(request, id: id)
        try await store.delete(link: link.row)
        return answer(.noContent, bytes: [], contentType: "application/octet-stream", nonce: nonce)
    }

    /// `GET /links/ID` with the delete token: views left and expiry, for `vault link list`.
    func linkInfo(_ request: Request, id: [UInt8], nonce: [UInt8]?) async throws -> Response {
        let link = try await owned(request, id: id)
        return answer(json: LinkAPI.Info(views: link.views, expires: link.expires), nonce: nonce)
    }

    private func owned(_ request: Request, id: [UInt8]) async throws -> StoredLink {
        guard let token = request.headers[Self.field(LinkAPI.Header.deleteToken)].flatMap({ Base64URL.decode($0, length: 32) }) else {
            throw RelayFailure.malformed("the request has no \(LinkAPI.Header.deleteToken) header of 32 bytes")
        }
        return try await link(id, holder: token, of: \.deleteHash,
                              wrong: RelayFailure(status: .forbidden, code: "wrong_token", words: "the delete token is wrong"))
    }

    /// The link, for the holder of the secret whose SHA-256 it stores at `hash` (the claim
    /// secret, or the delete token).
    ///
    /// Every attempt spends one of the link's allowance in the store first, in one statement,
    /// and only then is the secret compared; a right one is given back. Checking the
    /// allowance, comparing and then spending (as before issue 37) let 300 claims sent at
    /// once all pass the check before any was counted (M1), and a count per process let each
    /// PostgreSQL process grant its own. Once the allowance is spent, every attempt waits,
    /// right or wrong: that is what bounds online guessing of a link's password.
    private func link(_ id: [UInt8], holder secret: [UInt8], of hash: KeyPath<StoredLink, [UInt8]>, wrong: RelayFailure) async throws -> StoredLink {
        let now = UInt64(VaultClock.now().timeIntervalSince1970 * 1000)
        switch try await store.spendAttempt(link: id, now: now, burst: LinkAPI.attemptBurst, interval: LinkAPI.attemptInterval) {
        case .spent: break
        case .exhausted: throw RelayFailure.rateLimited()
        case .gone: throw RelayFailure.gone()
        }
        guard let link = try await store.link(id: id, now: Self.now()) else { throw RelayFailure.gone() }
        guard sha256(secret).constantTimeEquals(link[keyPath: hash]) else { throw wrong }
        try await store.refundAttempt(link: link.row, interval: LinkAPI.attemptInterval)
        return link
    }
}

extension RelayFailure {
    static func gone() -> RelayFailure {
        .init(status: .notFound, code: "gone", words: "this link has expired, was used up, or never existed")
    }
}
