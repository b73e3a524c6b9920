import Foundation

/// A group: the people who send each other messages through relays, and the relays they
/// use, as its owner signed it (Docs/FORMAT.md §16).
///
/// The record is the one place a member learns a group from: it names each relay by URL
/// *and* key card, so a member who accepts a record from an owner it trusts pins every
/// relay by the owner's word and needs no other set-up. Relays keep it too, to know whose
/// signed requests to serve. They read it in the clear: the group's name, its members'
/// labels and keys, and its relays' names and URLs (Docs/RELAY.md, "Threat model"); a
/// relay cannot change it without the owner's key.
public struct GroupRecord: Equatable, Sendable {
    /// A relay of the group.
    public struct Relay: Equatable, Sendable {
        /// The owner's name for it.
        public let name: Label
        /// Where it listens: `https://…` or `http://…`.
        public let url: String
        /// Its key card, which signs its answers.
        public let card: KeyCard

        /// A relay entry; the URL is checked by ``GroupRecord/init(id:version:name:owner:relays:members:signer:)``.
        public init(name: Label, url: String, card: KeyCard) {
            self.name = name
            self.url = url
            self.card = card
        }
    }

    /// A member of the group.
    public struct Member: Equatable, Sendable {
        /// The owner's name for the member.
        public let label: Label
        /// The member's keys.
        public let card: KeyCard

        /// A member entry.
        public init(label: Label, card: KeyCard) {
            self.label = label
            self.card = card
        }
    }

    /// 128 random bits.
    public let id: [UInt8]
    /// Higher for every change: relays and members keep the highest version they have seen.
    public let version: UInt64
    /// The owner's name for the group.
    public let name: Label
    /// The owner, who alone may change the group. Also a member.
    public let owner: KeyCard
    /// 2 … 32 relays; a message is split across all of them.
    public let relays: [Relay]
    /// 1 … 255 members, the owner among them.
    public let members: [Member]
    /// The whole record as it travels: magic, version, body and the owner's signature.
    public let encoded: [UInt8]

    static let magic: [UInt8] = Array("VLTG".utf8)
    static let formatVersion: UInt8 = 1
    static let signatureDomain = Array("vault/v1/group-record".utf8)
    /// At most this many relays: a message's n. Grouper's evaluation used groups of 30
    /// servers; 32 keeps a message's header (32 bytes of commitment a relay) and a record
    /// small, and a send's concurrent uploads bounded (Docs/DECISIONS.md, "Groups of 32").
    public static let maximumRelays = 32
    /// At most this many members, the owner included.
    public static let maximumMembers = 255
    static let maximumURLBytes = RelayURL.maximumBytes
    /// The largest record the fields allow, so a longer one is refused before it is read.
    public static let maximumLength = 9 + 16 + 8 + 256 + KeyCard.encodedLength + 1
        + maximumRelays * (256 + 2 + maximumURLBytes + KeyCard.encodedLength) + 1 + maximumMembers * (256 + KeyCard.encodedLength) + 64

    /// The group id as 32 hex digits.
    public var idHex: String { id.hex }

    /// The member named `name` in this record (ignoring case, as labels compare), if any.
    public func member(named name: String) -> Member? {
        let key = (try? Label(name))?.key ?? name.lowercased()
        return members.first { $0.label.key == key }
    }

    /// The member with this signing key, if any.
    public func member(signingKey: [UInt8]) -> Member? {
        members.first { Sodium.equal($0.card.signingKey, signingKey) }
    }

    /// Makes and signs a record. `signer` must be `owner`.
    public init(id: [UInt8], version: UInt64, name: Label, owner: KeyCard, relays: [Relay], members: [Member],
                signer: Identity) throws(VaultError) {
        precondition(id.count == 16 && signer.card == owner)
        let body = try Self.body(id: id, version: version, name: name, owner: owner, relays: relays, members: members)
        self.id = id
        self.version = version
        self.name = name
        self.owner = owner
        self.relays = relays
        self.members = members
        encoded = SignedFrame.make(magic: Self.magic, version: Self.formatVersion, body: body, domain: Self.signatureDomain, signer: signer)
    }

    /// Parses a record and checks its owner's signature. A record that parses was signed by
    /// the owner it names; whether that owner is trusted is the caller's question.
    public init(parsing bytes: [UInt8]) throws(VaultError) {
        func fail(_ detail: String) -> VaultError { .malformed(what: "the group record", detail: detail) }
        guard bytes.count >= 9, Array(bytes[0..<4]) == Self.magic else { throw fail("not a vault group record") }
        guard bytes[4] == Self.formatVersion else {
            throw .unsupportedVersion(what: "the group record", version: bytes[4], supported: Self.formatVersion)
        }
        guard bytes.count <= Self.maximumLength else { throw fail("it is too long") }
        let length = SignedFrame.bodyLength(bytes)
        guard bytes.count == 9 + length + 64 else { throw fail(bytes.count < 9 + length + 64 ? "it is truncated" : "bytes follow its end") }
        let body = Array(bytes[9..<(9 + length)])
        var r = ByteReader(body)
        do {
            id = try r.raw(16)
            version = try r.u64()
            name = try Label(signed: &r)
            owner = try KeyCard(encoded: try r.raw(KeyCard.encodedLength))
            relays = try (0..<Int(try r.u8())).map { _ in
                let name = try Label(signed: &r)
                let url = try r.string16("relay URL")
                return Relay(name: name, url: url, card: try KeyCard(encoded: try r.raw(KeyCard.encodedLength)))
            }
            members = try (0..<Int(try r.u8())).map { _ in
                Member(label: try Label(signed: &r), card: try KeyCard(encoded: try r.raw(KeyCard.encodedLength)))
            }
            try r.end()
        } catch let failure as ByteReader.Failure {
            throw fail(failure.description)
        } catch let error as VaultError {
            throw fail(error.description)
        } catch {
            throw fail(VaultError.words(for: error))
        }
        // The guest box's id is no group's (relays refuse such a record too).
        guard id != [UInt8](repeating: 0, count: 16) else { throw fail("its id is the guest box's, 16 zero bytes") }
        // Re-encoding checks every rule the maker checks (counts, URLs, the owner a member)
        // and that the bytes are the one encoding of what was parsed.
        let canonical: [UInt8]
        do {
            canonical = try Self.body(id: id, version: version, name: name, owner: owner, relays: relays, members: members)
        } catch {
            throw fail("its relays or members break the rules: \(error)")
        }
        guard canonical == body else { throw fail("it is not canonically encoded") }
        guard owner.verify(signature: Array(bytes[(9 + length)...]), of: Self.signatureDomain + body) else {
            throw .badSignature(what: "the group record")
        }
        encoded = bytes
    }

    private static func body(id: [UInt8], version: UInt64, name: Label, owner: KeyCard, relays: [Relay], members: [Member])
        throws(VaultError) -> [UInt8] {
        guard (2...maximumRelays).contains(relays.count) else {
            throw .invalidGroup("a group needs 2 to \(maximumRelays) relays, and this one has \(relays.count)")
        }
        guard (1...maximumMembers).contains(members.count) else {
            throw .invalidGroup("a group has 1 to \(maximumMembers) members, and this one has \(members.count)")
        }
        guard members.contains(where: { $0.card == owner }) else { throw .invalidGroup("the owner is not a member") }
        // Each key once: a member listed with another's X25519 key (and its own signing key)
        // would read what is sealed to that other member and answer in its name.
        guard Set(members.map(\.card.signingKey)).count == members.count, Set(members.map(\.card.agreementKey)).count == members.count,
              Set(members.map(\.label.key)).count == members.count else {
            throw .invalidGroup("a member appears twice")
        }
        guard Set(relays.map(\.card.signingKey)).count == relays.count, Set(relays.map(\.name.key)).count == relays.count else {
            throw .invalidGroup("a relay appears twice")
        }
        // Stores keep versions as signed 64-bit integers (SQLite, PostgreSQL): a larger one
        // would trap whoever converts it.
        guard version <= UInt64(Int64.max) else { throw .invalidGroup("a group's version is at most 2^63 - 1") }
        // One spelling per URL (no trailing /), so clients join paths to it as written, and
        // one reading of it (RelayURL), so every member reaches the same relay.
        for relay in relays { try RelayURL.checkCanonical(relay.url) }
        var w = ByteWriter()
        w.raw(id)
        w.u64(version)
        w.string8(name.value)
        w.raw(owner.encoded)
        w.u8(UInt8(relays.count))
        for relay in relays {
            w.string8(relay.name.value)
            w.string16(relay.url)
            w.raw(relay.card.encoded)
        }
        w.u8(UInt8(members.count))
        for member in members {
            w.string8(member.label.value)
            w.raw(member.card.encoded)
        }
        return w.bytes
    }
}
