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

    /// A group the caller is a member of, by id and version.
    public struct GroupEntry: Codable, Sendable {
        /// 32 hex digits.
        public let id: String
        /// The record's version.
        public let version: UInt64

        /// An entry.
        public init(id: String, version: UInt64) {
            self.id = id
            self.version = version
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

    /// `GET /v1/messages?after=CURSOR&limit=N[&wait=S]`.
    ///
    /// A cursor is a non-negative integer that orders messages as the relay finished storing
    /// them; `after=C` lists those after C. It is never reused, so a client that keeps the
    /// last one it saw asks later for what came since.
    public struct Messages: Codable, Sendable {
        /// Up to `limit` messages, in cursor order.
        public let messages: [MessageEntry]
        /// When the page is full: the cursor of its last message, in decimal digits (a JSON
        /// string), where the next page starts.
        public let next: String?
        /// The cursor of the last message listed (a JSON number), whether or not the page is
        /// full; absent when none is.
        public let last: Int64?

        /// The body.
        public init(messages: [MessageEntry], next: String?, last: Int64?) {
            self.messages = messages
            self.next = next
            self.last = last
        }
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
        /// A stable code for programs: `bad_signature`, `replayed`, `clock_skew`, `too_large`,
        /// `not_a_member`, `unknown_group`, `not_found`, `malformed`, `stale`, `over_quota`,
        /// `rate_limited`, `ttl_too_long`, `exists`.
        public let code: String

        /// The body.
        public init(error: String, code: String) {
            self.error = error
            self.code = code
        }
    }

    /// The most messages a page lists.
    public static let maximumPage = 500

    /// The seconds `GET /v1/messages?wait=S` may ask the relay to hold a request that finds
    /// nothing.
    public static let waits = 1...30
}
