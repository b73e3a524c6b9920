import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import VaultCore
import VaultRelayProtocol

/// Messages on a relay: a member stores its share of a message for other members, who
/// list, fetch and confirm what is addressed to them.
extension Relay {
    /// `PUT /v1/groups/{group}/messages/{message}`: a message share, streamed into the store
    /// 64 KiB at a time. The share's signed header is checked as soon as it is in (sender,
    /// group, recipients, size, TTL, the group's quota) and the piece against its
    /// commitment at the end; the message is served only once all of it checked out, and a
    /// share refused part way leaves nothing behind.
    func putMessage(_ request: Request, group: [UInt8], id: [UInt8], caller: Caller) async throws -> Response {
        let admit: (IncomingRelayMessage.Envelope, UInt64) async throws -> Void
        if group == GroupRecord.guestBoxID {
            admit = { try await self.checkGuest($0, length: $1, id: id, caller: caller) }
        } else {
            guard let stored = try await store.group(id: group), let record = groupCache.record(stored) else {
                throw RelayFailure.unknownGroup()
            }
            guard try await store.isMember(caller.key, of: group) else { throw RelayFailure.notAMember() }
            admit = { header, _ in try await self.check(header, group: record, id: id, caller: caller) }
        }
        let limit = configuration.maximumMessage
        if let declared = request.headers[.contentLength].flatMap({ UInt64($0) }), declared > limit {
            throw RelayFailure.tooLarge("a message share is at most \(ByteCount.limit(limit)) on this relay")
        }
        var incoming = IncomingRelayMessage(maximumLength: IncomingMessageShare.largest)
        let hasher = SHA256Hasher()
        var pending: [UInt8] = []
        var message: NewMessage?
        var row: Int64?
        var chunks = 0
        do {
            for try await buffer in request.body {
                do {
                    try buffer.withUnsafeReadableBytes { bytes throws(VaultError) in
                        try incoming.take(bytes)
                        hasher.update(bytes)
                    }
                } catch {
                    throw RelayFailure.malformed("the message is not valid: \(error)")
                }
                pending += buffer.readableBytesView
                if message == nil, let header = incoming.envelope {
                    guard incoming.length <= limit else { throw RelayFailure.tooLarge("a message share is at most \(ByteCount.limit(limit)) on this relay") }
                    try await admit(header, incoming.length)
                    message = NewMessage(group: group, id: id, sender: caller.key, size: incoming.length, expires: header.expiresAt,
                                         deleteWhenConfirmed: header.deleteWhenConfirmed, bodyHash: caller.bodyHash,
                                         recipients: header.recipients, created: Self.now())
                }
                // A share larger than a row streams into the store as it comes; one that
                // fits a row is stored whole at the end, in one transaction.
                if row == nil, let message, pending.count >= RelayStoreLimits.chunk {
                    row = try started(try await store.begin(message: message, quotas: quotas, now: Self.now()))
                }
                while let row, pending.count >= RelayStoreLimits.chunk {
                    try await store.append(chunk: Array(pending[..<RelayStoreLimits.chunk]), index: chunks, to: row)
                    pending.removeFirst(RelayStoreLimits.chunk)
                    chunks += 1
                }
            }
            do {
                try incoming.finish()
            } catch {
                throw RelayFailure.malformed("the message is not valid: \(error)")
            }
            guard hasher.finish() == caller.bodyHash else { throw RelayFailure.bodyMismatch() }
            if let row {
                if !pending.isEmpty { try await store.append(chunk: pending, index: chunks, to: row) }
                try await store.finish(message: row)
            } else if let message {
                _ = try started(try await store.storeWhole(message: message, bytes: pending, quotas: quotas, now: Self.now()))
            }
        } catch is RelayStoreConflict {
            throw RelayFailure(status: .conflict, code: "exists", words: "the relay already has this message")
        } catch {
            if let row { try? await store.abandon(message: row) }
            throw error
        }
        let recipients = message?.recipients ?? []
        // Its recipients' waiting lists here answer now; other processes sharing a PostgreSQL
        // store hear of it from the store (PostgresRelayStore's NOTIFY).
        waiters.wake(recipients.map(\.hex))
        return answer(.created, bytes: [], contentType: "application/octet-stream", nonce: caller.nonce)
    }

    /// The row of a message the store started, or the refusal of the quota it would pass.
    private func started(_ outcome: MessageBegin) throws -> Int64 {
        switch outcome {
        case .started(let row): return row
        case .overGroupQuota:
            throw RelayFailure.overQuota("the group has used its quota of \(ByteCount.limit(configuration.groupQuota)) on this relay")
        case .overOwnerQuota:
            throw RelayFailure.overQuota("the group's owner has used its quota of \(ByteCount.limit(configuration.ownerQuota)) on this relay")
        case .overTotalQuota:
            throw RelayFailure.overQuota("the relay holds as much as its operator allows; try again later")
        }
    }

    /// What a message's signed header must say to be stored here. A share must be this
    /// relay's; an object message is the same on every relay of the group.
    private func check(_ header: IncomingRelayMessage.Envelope, group record: GroupRecord, id: [UInt8], caller: Caller) async throws {
        let group = record.id
        guard header.groupID == group, header.messageID == id else {
            throw RelayFailure.malformed("the message is for another group or message than its path names")
        }
        if let share = header.share {
            guard share.count == record.relays.count, record.relays.firstIndex(where: { $0.card == identity.card }) == share.index - 1 else {
                throw RelayFailure.malformed("the message share is not this relay's: its index or count does not match the group's relays")
            }
        } else {
            guard record.relays.contains(where: { $0.card == identity.card }) else {
                throw RelayFailure.malformed("this relay is not one of the group's")
            }
        }
        guard header.sender.signingKey == caller.key else {
            throw RelayFailure(status: .forbidden, code: "not_the_sender", words: "only a message's sender may store it")
        }
        // Named is enough: a member who has not accepted the group yet is served the message
        // once it does, within its TTL.
        for recipient in header.recipients where try await !store.isNamed(recipient, in: group) {
            throw RelayFailure(status: .forbidden, code: "not_a_member", words: "a recipient is not a member of this group")
        }
        try checkTimes(header)
    }

    /// What a message to the guest box must be (Docs/RELAY.md, "The guest box"): a holder
    /// message to one recipient, between two keys at least one of which is a member of a
    /// group here, within the guest box's counts.
    ///
    /// A relay is not an open mailbox: strangers to it cannot use it between themselves, and
    /// what a key that is a member of nothing here may leave, or have waiting for it, is a
    /// few small messages. Keys cost nothing to make, so the count a recipient may have
    /// waiting bounds what a flood of new keys can do to it: fill its guest box until the
    /// messages expire, never its groups' mail.
    private func checkGuest(_ header: IncomingRelayMessage.Envelope, length: UInt64, id: [UInt8], caller: Caller) async throws {
        guard header.groupID == GroupRecord.guestBoxID, header.messageID == id else {
            throw RelayFailure.malformed("the message is for another group or message than its path names")
        }
        guard header.share == nil, header.isHolder, header.recipients.count == 1, let recipient = header.recipients.first else {
            throw RelayFailure.malformed("the guest box takes holder messages to one recipient only")
        }
        guard header.sender.signingKey == caller.key else {
            throw RelayFailure(status: .forbidden, code: "not_the_sender", words: "only a message's sender may store it")
        }
        // Nothing in the guest box is kept for other machines: a guest message goes once
        // read, and what it took is free again.
        guard header.deleteWhenConfirmed else {
            throw RelayFailure.malformed("a message to the guest box is deleted once its recipient confirms it")
        }
        let now = Self.now()
        if try await !store.isMember(caller.key) {
            guard try await store.isMember(recipient) else {
                throw RelayFailure(status: .forbidden, code: "not_a_member",
                                   words: "the guest box carries messages to or from a member of a group on this relay only")
            }
            // A key that is a member of nothing here sends requests, which are small: its 16
            // cannot take the guest box's quota from the guests that follow.
            guard length <= GuestBoxLimits.strangerMessage else {
                throw RelayFailure.tooLarge("a key in no group here sends at most \(ByteCount.limit(GuestBoxLimits.strangerMessage)) to the guest box")
            }
            // Counted before the upload: parallel uploads of one key can pass it by what the
            // key's rate limit lets through (Docs/RELAY.md, "The guest box").
            guard try await store.guestMessages(from: caller.key, to: nil, now: now) < GuestBoxLimits.perSender else {
                throw RelayFailure(status: .tooManyRequests, code: "guest_box_full",
                                   words: "this key has \(GuestBoxLimits.perSender) messages waiting in the guest box here; "
                                       + "try again once they are read or expire")
            }
        }
        guard try await store.guestMessages(from: nil, to: recipient, now: now) < GuestBoxLimits.perRecipient else {
            throw RelayFailure(status: .tooManyRequests, code: "guest_box_full",
                               words: "the recipient has \(GuestBoxLimits.perRecipient) messages waiting in its guest box here; "
                                   + "try again once it reads them")
        }
        try checkTimes(header)
    }

    /// The times a message's header says, against this relay's clock and TTL.
    private func checkTimes(_ header: IncomingRelayMessage.Envelope) throws {
        let now = Self.now()
        // Signed requests are taken within the clock window; so are the messages they carry
        // (Docs/FORMAT.md §17, "Times").
        guard header.createdAt <= now + RequestSignature.window else {
            throw RelayFailure.malformed("the message says it was made \(DurationText.rounded(header.createdAt - now)) from now, "
                                         + "more than the \(RequestSignature.window) s the clocks may differ")
        }
        guard header.expiresAt > now else { throw RelayFailure.malformed("the message has already expired") }
        guard header.expiresAt <= now + configuration.maximumTTL + RequestSignature.window else {
            throw RelayFailure(status: .badRequest, code: "ttl_too_long",
                               words: "this relay keeps messages at most \(DurationText.text(configuration.maximumTTL))")
        }
    }

    /// `GET /v1/messages?after=CURSOR&limit=N&group=G&wait=S`: what waits for the caller, in
    /// the order it was stored, in group G only when given. With `wait`, a request that finds
    /// nothing is held until a message for the caller is stored or S seconds pass
    /// (Docs/RELAY.md, "Waiting for messages").
    func listMessages(_ request: Request, _ context: RelayContext, caller: Caller) async throws -> Response {
        let query = request.uri.queryParameters
        let cursor = try query.get("after").map { text throws(RelayFailure) -> Int64 in
            guard let value = Int64(text), value >= 0 else { throw .malformed("after is not a cursor") }
            return value
        } ?? 0
        let limit = try query.get("limit").map { text throws(RelayFailure) -> Int in
            guard let value = Int(text), (1...RelayAPI.maximumPage).contains(value) else {
                throw .malformed("limit is 1 to \(RelayAPI.maximumPage)")
            }
            return value
        } ?? 100
        let wait = try query.get("wait").map { text throws(RelayFailure) -> Int in
            guard text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int(text), RelayAPI.waits.contains(value) else {
                throw .malformed("wait is \(RelayAPI.waits.lowerBound) to \(RelayAPI.waits.upperBound) seconds")
            }
            return value
        }
        let group = try query.get("group").map { text throws(RelayFailure) -> [UInt8] in
            guard let id = [UInt8](hexID: text) else { throw .malformed("group is not 32 lowercase hex digits") }
            return id
        }
        let store = self.store
        let list = { try await store.messages(for: caller.key, in: group, after: cursor, limit: limit, now: Self.now()) }
        let listed: [ListedMessage]
        // Only members wait: a key that is in no group here has nothing to wait for, and
        // keys cost nothing to make, so strangers could otherwise take every waiting slot.
        // A guest (Docs/RELAY.md, "The guest box") waits for the answers to what it sent.
        if let wait, let guest = try await waitsAsGuest(caller.key) {
            let waiters = self.waiters
            // A relay shutting down answers its waiting requests now rather than holding its
            // shutdown for their time.
            listed = try await withGracefulShutdownHandler {
                try await waiters.poll(for: caller.key.hex, seconds: wait, connection: context.connection, guest: guest, list)
            } onGracefulShutdown: {
                waiters.close()
            }
        } else {
            listed = try await list()
        }
        let entries = listed.map { RelayAPI.MessageEntry(group: $0.group.hex, id: $0.id.hex, size: $0.size, expires: $0.expires) }
        let next = listed.count == limit ? listed.last?.cursor : nil
        let page = RelayAPI.Messages(messages: entries, next: next, last: listed.last?.cursor)
        return answer(.ok, bytes: page.json, contentType: "application/json", nonce: caller.nonce)
    }

    /// Whether `key` may hold a waiting list, and in which slots: false for a member, true
    /// for a guest waiting for the answers to what it sent (Docs/RELAY.md, "The guest box"),
    /// nil for neither.
    private func waitsAsGuest(_ key: [UInt8]) async throws -> Bool? {
        if try await store.isMember(key) { return false }
        return try await store.isGuest(key, now: Self.now()) ? true : nil
    }

    /// `GET /v1/groups/{group}/messages/{message}`: the share, streamed from the store, for
    /// a recipient that is still a member, while it has not expired. The answer's signature
    /// covers the share's hash as its sender signed it when storing it.
    func getMessage(group: [UInt8], id: [UInt8], caller: Caller) async throws -> Response {
        guard let message = try await store.message(group: group, id: id, for: caller.key, now: Self.now()) else {
            throw RelayFailure.notFound()
        }
        var headers = signedHeaders(status: .ok, bodyHash: message.bodyHash, nonce: caller.nonce)
        headers[.contentType] = "application/octet-stream"
        let store = self.store
        return Response(status: .ok, headers: headers, body: ResponseBody(contentLength: Int(message.size)) { writer in
            var index = 0, sent: UInt64 = 0
            // The chunk that completes the size ends the body, with no read for a next one
            // (for most messages, one chunk, that was a third of a GET's reads).
            while sent < message.size, let chunk = try await store.chunk(index, of: message.row) {
                try await writer.write(ByteBuffer(bytes: chunk))
                sent += UInt64(chunk.count)
                index += 1
            }
            try await writer.finish(nil)
        })
    }

    /// `POST /v1/groups/{group}/messages/{message}/confirm`: the recipient has it.
    func confirmMessage(group: [UInt8], id: [UInt8], caller: Caller) async throws -> Response {
        guard try await store.confirm(group: group, id: id, by: caller.key, now: Self.now()) else { throw RelayFailure.notFound() }
        return answer(.noContent, bytes: [], contentType: "application/octet-stream", nonce: caller.nonce)
    }
}

extension Relay {
    /// `DELETE /v1/groups/{group}/messages/{message}`: the sender takes back its own
    /// message, such as a send that failed before enough relays stored it to be read
    /// (Docs/RELAY.md, "Gaps and resends"). Anyone else gets 404, as for receipts.
    func deleteMessage(group: [UInt8], id: [UInt8], caller: Caller) async throws -> Response {
        guard try await store.delete(group: group, id: id, sender: caller.key) else { throw RelayFailure.notFound() }
        return answer(.noContent, bytes: [], contentType: "application/octet-stream", nonce: caller.nonce)
    }

    /// `GET /v1/groups/{group}/messages/{message}/receipts`: for the message's sender, how
    /// many recipients confirmed it, so it can drop the message from its outbox. Anyone
    /// else gets 404, as for a message that is not there: the relay says nothing of
    /// other members' messages.
    func receipts(group: [UInt8], id: [UInt8], caller: Caller) async throws -> Response {
        guard let receipts = try await store.receipts(group: group, id: id, sender: caller.key, now: Self.now()) else {
            throw RelayFailure.notFound()
        }
        return answer(json: RelayAPI.Receipts(recipients: receipts.recipients, confirmed: receipts.confirmed), nonce: caller.nonce)
    }
}

/// What the guest box lets through (Docs/RELAY.md, "The guest box"): a social recovery
/// asks each holder once, and each answers once, so a few messages a key are plenty.
enum GuestBoxLimits {
    /// Unconfirmed, unexpired guest messages one key that is a member of no group here may
    /// have sent that wait here. (A member's answers are bounded by its recipients' count.)
    static let perSender = 16
    /// Unconfirmed, unexpired guest messages that may wait here for one recipient.
    static let perRecipient = 64
    /// The largest guest message from a key that is a member of no group here: a holder
    /// record of the padded size (512 bytes, FORMAT.md §20) is about 1.3 KiB sealed.
    static let strangerMessage: UInt64 = 16 << 10
}

/// How the stores cut what they keep.
enum RelayStoreLimits {
    /// A message is stored in rows of this many bytes, so it streams in and out.
    static let chunk = 1 << 16
}
