import Foundation
import Testing
@testable import VaultCore
import VaultTestSupport

/// Relay message shares (FORMAT §17): alice sends to bob and carol, 2 of 3 relays; every
/// recipient opens any two shares, nobody else opens any, and every change to a share is
/// caught where it is read.
@Suite struct MessageShareTests {
    let deal: CraftedDeal
    let group = SecureRandom().bytes(16)

    init() throws { deal = try CraftedDeal() }

    var alice: Identity { deal.identities[0] }
    var bob: Identity { deal.identities[1] }
    var carol: Identity { deal.identities[2] }

    /// Deals `content` into three share files; returns their paths.
    func send(_ content: [UInt8], type: SecretType = .note, metadata: SecretMetadata = SecretMetadata(),
              tag: String = "m") throws -> [String] {
        let outputs = try (1...3).map { try OutputFile(path: deal.temporary.file("\(tag)-\($0).vmsg")) }
        let request = MessageRequest(groupID: group, type: type, metadata: metadata, threshold: 2,
                                     recipients: [MessageRecipient(card: bob.card, sequence: 7), MessageRecipient(card: carol.card, sequence: 1)],
                                     lifetime: 3600, deleteWhenConfirmed: true)
        let headers = try MessageDealer.deal(request, content: BytesSource(content), sender: alice, outputs: outputs)
        #expect(headers.map(\.index) == [1, 2, 3])
        for output in outputs { try output.commit() }
        return outputs.map(\.path)
    }

    func open(_ paths: [String], as identity: Identity) throws -> (content: [UInt8], opened: OpenedMessage) {
        let shares = try paths.map { try ReceivedShare(path: $0, recipient: identity) }
        var content: [UInt8] = []
        let opened = try MessageOpening.open(shares) { content += $0 }
        return (content, opened)
    }

    @Test(arguments: [0, 70_000, 3 * 65536])
    func anyTwoSharesOpenForEveryRecipient(length: Int) throws {
        let content = SecureRandom().bytes(length)
        let paths = try send(content, type: .file, metadata: SecretMetadata(fileName: "plan.txt"))
        for (identity, pair) in [(bob, [0, 2]), (carol, [1, 2]), (bob, [1, 0])] {
            let (opened, message) = try open(pair.map { paths[$0] }, as: identity)
            #expect(opened == content)
            #expect(message.metadata.fileName == "plan.txt")
            #expect(message.header.sender == alice.card)
            #expect(message.header.groupID == group)
            #expect(message.header.recipients.map(\.sequence) == [7, 1])
        }
    }

    @Test func theSenderAndOthersOpenNothing() throws {
        let paths = try send(Array("hello".utf8))
        #expect(throws: VaultError.notForThisIdentity(what: "the message")) { try open(paths, as: alice) }
    }

    @Test func oneShareIsNotEnough() throws {
        let paths = try send(Array("hello".utf8))
        #expect(throws: VaultError.tooFewPieces(have: 1, need: 2, missing: ["share 2", "share 3"])) { try open([paths[0]], as: bob) }
    }

    @Test func sharesOfTwoMessagesDoNotCombine() throws {
        let first = try send(Array("one".utf8), tag: "a"), second = try send(Array("two".utf8), tag: "b")
        #expect(throws: VaultError.mixedSecrets(file: second[1], secretID: try ReceivedShare(path: first[0], recipient: bob).header.messageIDHex)) {
            try open([first[0], second[1]], as: bob)
        }
        #expect(throws: VaultError.duplicateIndex(1)) { try open([first[0], first[0]], as: bob) }
    }

    /// A byte changed anywhere (header, signature, box, piece), a byte cut or added: each is
    /// refused by IncomingMessageShare, as a relay and a recipient read shares.
    @Test func everyAlterationIsCaught() throws {
        let path = try send(SecureRandom().bytes(100_000))[0]
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        var reference = IncomingMessageShare(maximumLength: 1 << 20)
        try bytes.withUnsafeBytes { try reference.take($0) }
        try reference.finish()
        let header = reference.prefixLength - 64
        func check(_ altered: [UInt8]) -> Bool {
            var incoming = IncomingMessageShare(maximumLength: 1 << 20)
            do {
                // In uneven pieces, as the network brings them.
                var offset = 0
                while offset < altered.count {
                    let end = min(altered.count, offset + 1 + offset % 9000)
                    try altered[offset..<end].withUnsafeBytes { try incoming.take($0) }
                    offset = end
                }
                try incoming.finish()
                _ = try ReceivedShare(checked: incoming, path: path, recipient: bob)
                return false
            } catch {
                return true
            }
        }
        for position in [0, 4, 20, header - 1, header + 10, reference.prefixLength + 30, reference.prefixLength + 300, bytes.count - 1] {
            var altered = bytes
            altered[position] ^= 0x01
            #expect(check(altered), "byte \(position) changed")
        }
        #expect(check(Array(bytes.dropLast())))
        #expect(check(bytes + [0]))
        #expect(check(Array(bytes.prefix(reference.prefixLength))))
    }

    /// A card whose signing key repeats under another agreement key is two entries for one
    /// reader, as relays serve by signing key: refused by the dealer.
    @Test func aRecipientAppearsOnce() throws {
        let twin = try KeyCard(encoded: [bob.card.encoded[0]] + carol.card.agreementKey + bob.card.signingKey)
        let request = MessageRequest(groupID: group, type: .note, threshold: 2,
                                     recipients: [MessageRecipient(card: bob.card, sequence: 1), MessageRecipient(card: twin, sequence: 1)],
                                     lifetime: 3600, deleteWhenConfirmed: false)
        let outputs = try (1...3).map { try OutputFile(path: deal.temporary.file("twin-\($0).vmsg")) }
        #expect(throws: VaultError.self) { try MessageDealer.deal(request, content: BytesSource([1]), sender: alice, outputs: outputs) }
    }

    @Test func aShareOverTheLimitIsRefusedFromItsHeader() throws {
        let path = try send(SecureRandom().bytes(200_000))[0]
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        var incoming = IncomingMessageShare(maximumLength: 50_000)
        #expect(throws: VaultError.self) { try bytes.prefix(4096).withUnsafeBytes { try incoming.take($0) } }
    }
}

/// Group records (FORMAT §16): signed by their owner, parsed strictly.
@Suite struct GroupRecordTests {
    let deal: CraftedDeal
    init() throws { deal = try CraftedDeal() }

    func record(version: UInt64 = 1, members: [Int] = [0, 1, 2], relays: Int = 3) throws -> GroupRecord {
        let owner = deal.identities[0]
        return try GroupRecord(
            id: [UInt8](repeating: 7, count: 16), version: version, name: Label("team"), owner: owner.card,
            relays: (0..<relays).map { i in
                GroupRecord.Relay(name: try Label("r\(i)"), url: "http://127.0.0.1:\(7780 + i)", card: Identity.generate(label: try Label("r"), random: SecureRandom()).0.card)
            },
            members: members.map { GroupRecord.Member(label: deal.identities[$0].label, card: deal.identities[$0].card) },
            signer: owner)
    }

    @Test func aRecordRoundTrips() throws {
        let made = try record()
        let parsed = try GroupRecord(parsing: made.encoded)
        #expect(parsed == made)
        #expect(parsed.member(signingKey: deal.identities[1].card.signingKey)?.label.value == "bob")
    }

    @Test func everyChangedByteIsRefused() throws {
        let bytes = try record().encoded
        for position in stride(from: 0, to: bytes.count, by: 7) {
            var altered = bytes
            altered[position] ^= 0x20
            #expect(throws: VaultError.self, "byte \(position)") { try GroupRecord(parsing: altered) }
        }
        #expect(throws: VaultError.self) { try GroupRecord(parsing: Array(bytes.dropLast())) }
        #expect(throws: VaultError.self) { try GroupRecord(parsing: bytes + [0]) }
    }

    @Test func theRulesHold() throws {
        #expect(throws: VaultError.invalidGroup("the owner is not a member")) { try record(members: [1, 2]) }
        #expect(throws: VaultError.self) { try record(relays: 1) }
        #expect(throws: VaultError.self) { try record(relays: 33) }
        #expect(throws: VaultError.invalidGroup("a member appears twice")) { try record(members: [0, 1, 1]) }
        // Stores keep versions as signed 64-bit integers.
        #expect(throws: VaultError.invalidGroup("a group's version is at most 2^63 - 1")) { try record(version: 1 << 63) }
        #expect(try record(version: UInt64(Int64.max)).version == UInt64(Int64.max))
    }

    @Test func aRelayURLHasOneSpelling() throws {
        let owner = deal.identities[0]
        let relays = try (0..<2).map { i in
            GroupRecord.Relay(name: try Label("r\(i)"), url: "http://127.0.0.1:778\(i)" + (i == 1 ? "/" : ""),
                              card: Identity.generate(label: try Label("r"), random: SecureRandom()).0.card)
        }
        #expect(throws: VaultError.self) {
            try GroupRecord(id: [UInt8](repeating: 7, count: 16), version: 1, name: Label("team"), owner: owner.card, relays: relays,
                            members: [GroupRecord.Member(label: owner.label, card: owner.card)], signer: owner)
        }
    }

    @Test(arguments: ["ftp://relay", "http://", "https://relay/path", "https://relay?x=1", "https://u:p@relay", "relay:7780"])
    func aBadRelayURLIsRefused(url: String) {
        #expect(throws: VaultError.self) { try RelayURL.check(url) }
    }
}
