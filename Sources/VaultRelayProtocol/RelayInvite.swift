import Foundation
import VaultCore

/// An invite a relay's operator hands to someone it lets own groups (`vault relay invite`):
/// `vault-invite-` and 32 random bytes in base64url. The relay keeps only its SHA-256, so a
/// copy of the store redeems nothing; whoever holds the text can redeem it, once a use.
public enum RelayInvite {
    static let prefix = "vault-invite-"

    /// A new invite: its text, and the hash the relay keeps.
    public static func make() -> (text: String, hash: [UInt8]) {
        let token = SecureRandom().bytes(32)
        return (prefix + Base64URL.encode(token), sha256(token))
    }

    /// The token of an invite's text, nil when it is not one (surrounding white space is
    /// dropped, as a pasted line carries).
    public static func token(_ text: String) -> [UInt8]? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.hasPrefix(prefix) else { return nil }
        return Base64URL.decode(trimmed.dropFirst(prefix.count), length: 32)
    }
}
