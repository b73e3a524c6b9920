import Foundation

/// The JSON bodies of the relay API (Docs/RELAY.md, "API"). Binary records (a group
/// record, a message share) travel as `application/octet-stream`, never inside JSON.
public enum RelayAPI {
    /// `GET /card`: who the relay is and what it accepts.
    public struct Card: Codable, Sendable {
        /// The relay's key card, `vault1…`.
        public let card: String
        /// The relay's clock, Unix seconds.
        public let time: UInt64
        /// The longest message share it accepts, in bytes.
        public let maxMessage: UInt64
        /// The longest time to live it accepts, in seconds.
        public let maxTTL: UInt64

        /// The body.
        public init(card: String, time: UInt64, maxMessage: UInt64, maxTTL: UInt64) {
            self.card = card
            self.time = time
            self.maxMessage = maxMessage
            self.maxTTL = maxTTL
        }
    }

    /// A group the caller is a member of, by id, version and owner.
    public struct GroupEntry: Codable, Sendable {
        /// 32 hex digits.
        public let id: String
        /// The record's version.
        public let version: UInt64
        /// The owner's Ed25519 key in base64url; absent from a relay from before owners were listed.
        public let owner: String?

        /// An entry.
        public init(id: String, version: UInt64, owner: String?) {
            self.id = id
            self.version = version
            self.owner = owner
        }
    }

    /// `GET /v1/groups`.
    public struct Groups: Codable, Sendable {
        /// The caller's groups.
        public let groups: [GroupEntry]

        /// The body.
        public init(groups: [GroupEntry]) { self.groups = groups }
    }

    /// A message waiting for the caller.
    public struct MessageEntry: Codable, Sendable {
        /// The group, 32 hex digits.
        public let group: String
        /// The message, 32 hex digits.
        public let id: String
        /// The share's length in bytes.
        public let size: UInt64
        /// When the relay forgets it, Unix seconds.
        public let expires: UInt64

        /// An entry.
        public init(group: String, id: String, size: UInt64, expires: UInt64) {
            self.group = group
            self.id = id
            self.size = size
            self.expires = expires
        }
    }

    /// `GET /v1/messages?after=CURSOR&limit=N[&group=G][&wait=S]`.
    ///
    /// A cursor is a non-negative integer that orders messages as the relay finished storing
    /// them; `after=C` lists those after C. It is never reused, so a client that keeps the
    /// last one it saw asks later for what came since.
    public struct Messages: Codable, Sendable {
        /// Up to `limit` messages, in cursor order.
        public let messages: [MessageEntry]
        /// When the page is full: the cursor of its last message (a JSON number, as `after`
        /// and `last` are), where the next page starts.
        public let next: Int64?
        /// The cursor of the last message listed (a JSON number), whether or not the page is
        /// full; absent when none is.
        public let last: Int64?

        /// The body.
        public init(messages: [MessageEntry], next: Int64?, last: Int64?) {
            self.messages = messages
            self.next = next
            self.last = last
        }

        private enum CodingKeys: String, CodingKey { case messages, next, last }

        /// Reads `next` as a number, or as the string of decimal digits relays before
        /// issue 37 wrote, so a client reads both.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            messages = try container.decode([MessageEntry].self, forKey: .messages)
            last = try container.decodeIfPresent(Int64.self, forKey: .last)
            if let number = try? container.decodeIfPresent(Int64.self, forKey: .next) {
                next = number
            } else if let text = try container.decodeIfPresent(String.self, forKey: .next) {
                guard text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int64(text) else {
                    throw DecodingError.dataCorruptedError(forKey: .next, in: container, debugDescription: "not a cursor")
                }
                next = value
            } else {
                next = nil
            }
        }
    }

    /// A group that names the caller, which it has neither accepted nor declined on this
    /// relay (`GET /v1/invitations`). The owner's card lets a client pass over a group from
    /// an owner it does not trust without fetching its record, and name it by fingerprint.
    public struct InvitationEntry: Codable, Sendable {
        /// The group, 32 hex digits.
        public let group: String
        /// The record's version.
        public let version: UInt64
        /// The owner's key card, `vault1…`, as the record names it.
        public let owner: String

        /// An entry.
        public init(group: String, version: UInt64, owner: String) {
            self.group = group
            self.version = version
            self.owner = owner
        }
    }

    /// `GET /v1/invitations`: up to ``maximumInvitations``, oldest first.
    public struct Invitations: Codable, Sendable {
        /// The invitations.
        public let invitations: [InvitationEntry]

        /// The body.
        public init(invitations: [InvitationEntry]) { self.invitations = invitations }
    }

    /// `POST /v1/groups/{group}/accept` and `…/decline`: the member's answer, for the owner
    /// it names (base64url Ed25519 key). A relay whose group of that id has another owner
    /// refuses it, so an acceptance meant for one owner never joins another's group.
    public struct Answer: Codable, Sendable {
        /// The owner the member means.
        public let owner: String

        /// The body.
        public init(owner: String) { self.owner = owner }
    }

    /// `POST /v1/owners`: an invite the relay's operator gave, which lets the caller own groups.
    public struct Redeem: Codable, Sendable {
        /// The invite's token, as `vault relay invite` printed it.
        public let invite: String

        /// The body.
        public init(invite: String) { self.invite = invite }
    }

    /// `GET /v1/groups/{group}/messages/{message}/receipts`, for the message's sender only:
    /// how many of its recipients confirmed it, while the relay keeps its record (until it
    /// expires, even when its content was deleted on confirmation).
    public struct Receipts: Codable, Sendable {
        /// Its recipients.
        public let recipients: Int
        /// Those that confirmed it.
        public let confirmed: Int

        /// The body.
        public init(recipients: Int, confirmed: Int) {
            self.recipients = recipients
            self.confirmed = confirmed
        }
    }

    /// Every error's body.
    public struct Failure: Codable, Sendable {
        /// In words, for a person.
        public let error: String
        /// A stable code for programs: `bad_signature`, `body_mismatch`, `replayed`,
        /// `clock_skew`, `too_large`, `not_a_member`, `not_an_owner`, `unknown_group`,
        /// `other_owner`, `not_found`, `malformed`, `stale`, `over_quota`, `too_many_groups`,
        /// `bad_invite`, `rate_limited`, `ttl_too_long`, `exists`, `signature_required`.
        public let code: String

        /// The body.
        public init(error: String, code: String) {
            self.error = error
            self.code = code
        }
    }

    /// The most messages a page lists.
    public static let maximumPage = 500

    /// The most invitations one answer lists.
    public static let maximumInvitations = 500

    /// The longest JSON request body (an answer to a group, an invite).
    public static let maximumJSONBody = 1024

    /// The seconds `GET /v1/messages?wait=S` may ask the relay to hold a request that finds
    /// nothing.
    public static let waits = 1...30
}
