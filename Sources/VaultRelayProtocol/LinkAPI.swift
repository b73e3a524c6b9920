import Foundation

/// The share-link API (Docs/LINKS.md, "API"). A link is created by anyone who can reach
/// the relay (there is no account: the relay's limits and quota bound what a stranger can
/// store), read by whoever holds its fragment, and deleted by whoever holds its delete
/// token.
public enum LinkAPI {
    /// `POST /links` headers.
    public enum Header {
        /// Seconds the relay keeps the link: 1 up to its `--max-ttl`.
        public static let ttl = "Vault-Link-TTL"
        /// Views before the link is deleted: 1 to ``maximumViews``.
        public static let views = "Vault-Link-Views"
        /// SHA-256 of the claim secret C, base64url.
        public static let claimHash = "Vault-Link-Claim-Hash"
        /// SHA-256 of the delete token, base64url.
        public static let deleteHash = "Vault-Link-Delete-Hash"
        /// The password's PBKDF2 cost, or 0 for a link without a password.
        public static let iterations = "Vault-Link-Iterations"
        /// The delete token itself (32 bytes, base64url), on `DELETE /links/ID` and
        /// `GET /links/ID`.
        public static let deleteToken = "Vault-Link-Delete"
        /// On a claim's answer: views left after this one.
        public static let viewsLeft = "Vault-Link-Views-Left"
    }

    /// The most views a link may have.
    public static let maximumViews = 1000
    /// Claims and delete tokens a link takes at once before it makes the next wait: a wrong
    /// password typed a few times costs nothing, and guessing goes no faster than
    /// ``attemptInterval`` after (Docs/LINKS.md, "Threat model").
    public static let attemptBurst: UInt64 = 10
    /// Milliseconds between attempts once the burst is spent.
    public static let attemptInterval: UInt64 = 6000
    /// A link id's length in bytes.
    public static let idLength = 16

    /// `POST /links` → 201.
    public struct Created: Codable, Sendable {
        /// The link's id, base64url.
        public let id: String
        /// When the relay forgets it, Unix seconds.
        public let expires: UInt64

        /// The body.
        public init(id: String, expires: UInt64) {
            self.id = id
            self.expires = expires
        }
    }

    /// `GET /links/ID/status` → 200: all a previewer learns, and all the page needs before
    /// the click (it shows the views left and the expiry before Reveal).
    public struct Status: Codable, Sendable {
        /// Whether it needs a password.
        public let password: Bool
        /// The password's PBKDF2 cost, when it needs one.
        public let iterations: Int?
        /// Views left (absent from relays before this field).
        public let views: Int?
        /// When the relay forgets it, Unix seconds (absent from relays before this field).
        public let expires: UInt64?

        /// The body.
        public init(password: Bool, iterations: Int?, views: Int?, expires: UInt64?) {
            self.password = password
            self.iterations = iterations
            self.views = views
            self.expires = expires
        }
    }

    /// `POST /links/ID/claim`'s body.
    public struct Claim: Codable, Sendable {
        /// The claim secret C, base64url.
        public let claim: String

        /// The body.
        public init(claim: String) { self.claim = claim }
    }

    /// `GET /links/ID` → 200, for the holder of the delete token.
    public struct Info: Codable, Sendable {
        /// Views left.
        public let views: Int
        /// When the relay forgets it, Unix seconds.
        public let expires: UInt64

        /// The body.
        public init(views: Int, expires: UInt64) {
            self.views = views
            self.expires = expires
        }
    }
}
