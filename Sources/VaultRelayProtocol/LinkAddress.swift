import Foundation
import VaultCore

/// A share link, `BASE/s/ID#FRAGMENT` (Docs/LINKS.md, "Link"): the relay's base URL, the
/// link's 16-byte id and the fragment (F, or F ‖ S with a password), each base64url.
///
/// The fragment is the secret: errors about a link never quote it, and it is kept in
/// locked memory once parsed.
public struct LinkAddress {
    /// The relay, as ``RelayURL`` checks it.
    public let base: String
    /// The id the relay gave.
    public let id: [UInt8]
    /// F, or F ‖ S.
    public let fragment: SecureBytes

    /// The parts of a link.
    public init(base: String, id: [UInt8], fragment: SecureBytes) {
        self.base = base
        self.id = id
        self.fragment = fragment
    }

    /// Reads a link as it was printed or pasted.
    public init(parsing text: String) throws(VaultError) {
        func fail(_ reason: String) -> VaultError { .malformed(what: "the link", detail: reason) }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.utf8.count <= 4096 else { throw fail("it is too long") }
        guard let hash = trimmed.firstIndex(of: "#") else { throw fail("it has no key after #; was it cut short?") }
        let location = trimmed[..<hash]
        guard let marker = location.range(of: "/s/", options: .backwards) else { throw fail("it is not BASE/s/ID#KEY") }
        do {
            base = try RelayURL.check(String(location[..<marker.lowerBound]))
        } catch {
            throw fail("its server part is not an http:// or https:// address")
        }
        guard let id = Base64URL.decode(location[marker.upperBound...], length: LinkAPI.idLength) else {
            throw fail("its id is damaged or cut short (it is 22 base64url characters, for 16 bytes)")
        }
        self.id = id
        let key = trimmed[trimmed.index(after: hash)...]
        guard let bytes = Base64URL.decode(key),
              bytes.count == LinkKeys.fragmentKeyLength || bytes.count == LinkKeys.fragmentKeyLength + LinkKeys.saltLength else {
            throw fail("its key is incomplete or damaged")
        }
        var copy = bytes
        fragment = SecureBytes(copying: copy)
        copy.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
    }

    /// Whether the fragment carries a password's salt.
    public var needsPassword: Bool { fragment.count > LinkKeys.fragmentKeyLength }

    /// The link as text, for the person who created it.
    public var text: String {
        base + "/s/" + Base64URL.encode(id) + "#" + fragment.withUnsafeBytes { Base64URL.encode(Array($0)) }
    }
}
