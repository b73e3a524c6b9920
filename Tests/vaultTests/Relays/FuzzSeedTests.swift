import Foundation
import Testing
@testable import VaultCore
import VaultRelayProtocol
import VaultTestSupport

/// The seed corpora of issue 37's fuzz targets (Fuzz/Corpus/Fuzz…): real inputs of each
/// parser, which libFuzzer mutates from. With VAULT_WRITE_FUZZ_SEEDS=1 they are made again
/// in place; otherwise each seed in the tree must still be what it was made as (a record
/// that parses, a share that reads whole), so a format change that orphans the corpus is
/// noticed here rather than by a fuzzer that quietly explores nothing.
@Suite struct FuzzSeedTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz/Corpus").path

    /// Every seed, by target and file name.
    static func seeds() throws -> [String: [String: [UInt8]]] {
        let temporary = TemporaryDirectory("vault-seeds")
        let alice = Identity.generate(label: try Label("alice"), random: SeededRandom(seed: "alice")).0
        let bob = Identity.generate(label: try Label("bob"), random: SeededRandom(seed: "bob")).0
        let relays = (0..<3).map { i in Identity.generate(label: try! Label("r"), random: SeededRandom(seed: "relay\(i)")).0 }
        let group = try GroupRecord(
            id: [UInt8](repeating: 7, count: 16), version: 1, name: Label("team"), owner: alice.card,
            relays: relays.enumerated().map { i, relay in
                GroupRecord.Relay(name: try! Label("r\(i + 1)"), url: i == 2 ? "https://[2001:db8::1]:443" : "http://127.0.0.1:\(7780 + i)",
                                  card: relay.card)
            },
            members: [GroupRecord.Member(label: alice.label, card: alice.card), GroupRecord.Member(label: bob.label, card: bob.card)],
            signer: alice)
        var seeds: [String: [String: [UInt8]]] = [:]
        seeds["FuzzGroupRecord"] = ["record": group.encoded, "url-ipv6": Array("http://[::1]:7780".utf8),
                                    "url-name": Array("https://relay.example.org/".utf8)]

        func share(kind: MessageHeader.Kind, sequence: UInt64, content: [UInt8], tag: String) throws -> [UInt8] {
            let outputs = try (1...3).map { try OutputFile(path: temporary.file("\(tag)-\($0)")) }
            let request = MessageRequest(groupID: group.id, kind: kind, type: .note, threshold: 2,
                                         recipients: [MessageRecipient(card: bob.card, sequence: sequence)], lifetime: 86400,
                                         deleteWhenConfirmed: kind != .content)
            _ = try MessageDealer.deal(request, content: BytesSource(content), sender: alice, outputs: outputs)
            for output in outputs { try output.commit() }
            return try [UInt8](Data(contentsOf: URL(fileURLWithPath: outputs[0].path)))
        }
        mkdir(temporary.file("home"), 0o700)
        let spool = try Spool(home: VaultHome(directory: temporary.file("home")))
        let change = ItemChange(keyID: [UInt8](repeating: 3, count: 16), itemID: [UInt8](repeating: 4, count: 16), counter: 2,
                                author: alice.card, operation: .put, createdAt: 1_700_000_000,
                                supersedes: [ItemVersion(counter: 1, author: bob.card.signingKey)], contentLength: 5,
                                contentHash: sha256(Array("hello".utf8)))
        let delete = ItemChange(keyID: [UInt8](repeating: 3, count: 16), itemID: [UInt8](repeating: 4, count: 16), counter: 3,
                                author: alice.card, operation: .delete, createdAt: 1_700_000_000,
                                supersedes: [change.version], contentLength: 0, contentHash: [UInt8](repeating: 0, count: 32))
        let object = try ObjectMessage.write(
            .init(groupID: group.id, kind: .changes, keyID: [UInt8](repeating: 3, count: 16), recipients: [bob.card], lifetime: 86400,
                  deleteWhenConfirmed: false),
            entries: { write in
                try ObjectEntries.write(record: change.signed(by: alice), content: { take in try Array("hello".utf8).withUnsafeBytes(take) },
                                        to: write)
            }, sender: alice, spool: spool)
        defer { unlink(object.path) }
        let objectBytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: object.path)))
        seeds["FuzzMessageShare"] = [
            "note": try share(kind: .content, sequence: 1, content: Array("the boat leaves at six".utf8), tag: "note"),
            "resend-request": try share(kind: .resendRequest, sequence: 0, content: [0, 0, 0, 0, 0, 0, 0, 3], tag: "resend"),
            "object": objectBytes,
        ]
        seeds["FuzzItemChange"] = ["put": change.signed(by: alice), "delete": delete.signed(by: alice)]
        seeds["FuzzObjectMessage"] = ["changes": objectBytes]

        let linkKey = SecureBytes(copying: Array(repeating: 7, count: 32))
        var blob: [UInt8] = []
        var note = BytesSource(Array("the spare key is under the third pot".utf8))
        try LinkStream.seal(meta: try LinkMeta(kind: .file, name: "plan.txt"), content: &note, key: linkKey) { blob += Array($0) }
        let link = LinkAddress(base: "https://relay.example.org", id: [UInt8](repeating: 1, count: 16),
                               fragment: SecureBytes(copying: [UInt8](repeating: 2, count: LinkKeys.fragmentKeyLength)))
        seeds["FuzzLink"] = ["blob": blob, "link": Array(link.text.utf8), "meta": Array("{\"name\":\"plan.txt\",\"type\":\"file\"}".utf8)]

        let headers = RequestSignature.headers(identity: bob, relay: relays[0].card.signingKey, method: "GET", path: "/v1/messages",
                                               bodyHash: sha256([]), time: 1_700_000_000, nonce: [UInt8](repeating: 5, count: 16))
        func json(_ value: some Encodable) throws -> [UInt8] { [UInt8](try JSONEncoder().encode(value)) }
        seeds["FuzzRelayRequest"] = [
            "headers": Array(headers.map { "\($0.0): \($0.1)" }.joined(separator: "\n").utf8),
            "answer": try json(RelayAPI.Answer(owner: Base64URL.encode(alice.card.signingKey))),
            "redeem": Array("{\"invite\":\"vault-invite-AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8\"}".utf8),
            "messages": Array("{\"last\":7,\"messages\":[{\"expires\":1700086400,\"group\":\"07070707070707070707070707070707\",\"id\":\"01010101010101010101010101010101\",\"size\":1181}],\"next\":7}".utf8),
            "groups": try json(RelayAPI.Groups(groups: [RelayAPI.GroupEntry(id: group.idHex, version: 1,
                                                                           owner: Base64URL.encode(alice.card.signingKey))])),
            "invitations": try json(RelayAPI.Invitations(invitations: [RelayAPI.InvitationEntry(group: group.idHex, version: 1, owner: alice.card.text)])),
            "claim": Array("{\"claim\":\"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8\"}".utf8),
        ]
        return seeds
    }

    @Test func theSeedsAreWhatTheyWereMadeAs() throws {
        let seeds = try Self.seeds()
        if ProcessInfo.processInfo.environment["VAULT_WRITE_FUZZ_SEEDS"] == "1" {
            for (target, files) in seeds {
                try FileManager.default.createDirectory(atPath: Self.corpus + "/" + target, withIntermediateDirectories: true)
                for (name, bytes) in files { try Data(bytes).write(to: URL(fileURLWithPath: "\(Self.corpus)/\(target)/\(name)")) }
            }
            return
        }
        func seed(_ target: String, _ name: String) throws -> [UInt8] {
            try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(Self.corpus)/\(target)/\(name)")))
        }
        #expect(try GroupRecord(parsing: seed("FuzzGroupRecord", "record")).relays.count == 3)
        for name in ["note", "resend-request", "object"] {
            var incoming = IncomingRelayMessage(maximumLength: 1 << 20)
            try seed("FuzzMessageShare", name).withUnsafeBytes { try incoming.take($0) }
            try incoming.finish()
        }
        #expect(try ItemChange(record: seed("FuzzItemChange", "put")).operation == .put)
        #expect(try ItemChange(record: seed("FuzzItemChange", "delete")).operation == .delete)
        var object = IncomingObjectMessage(maximumLength: 1 << 20)
        try seed("FuzzObjectMessage", "changes").withUnsafeBytes { try object.take($0) }
        try object.finish()
        var opened: [UInt8] = []
        let blob = try seed("FuzzLink", "blob")
        let opener = try LinkOpener(key: SecureBytes(copying: Array(repeating: 7, count: 32)), blobLength: UInt64(blob.count),
                                    metaReady: { _ in }, content: { opened += Array($0) })
        try blob.withUnsafeBytes { try opener.take($0) }
        #expect(try opener.finish().name == "plan.txt")
        #expect(opened == Array("the spare key is under the third pot".utf8))
        #expect(try LinkAddress(parsing: String(decoding: try seed("FuzzLink", "link"), as: UTF8.self)).id == [UInt8](repeating: 1, count: 16))
        let lines = String(decoding: try seed("FuzzRelayRequest", "headers"), as: UTF8.self).split(separator: "\n")
        let fields = Dictionary(uniqueKeysWithValues: lines.map { line in
            (String(line.prefix { $0 != ":" }), String(line.drop { $0 != ":" }.dropFirst()).trimmingCharacters(in: .whitespaces))
        })
        #expect(try SignedHeaders { fields[$0] }.time == 1_700_000_000)
        #expect(try JSONDecoder().decode(RelayAPI.Messages.self, from: Data(try seed("FuzzRelayRequest", "messages"))).next == 7)
        let listed = try JSONDecoder().decode(RelayAPI.Groups.self, from: Data(try seed("FuzzRelayRequest", "groups"))).groups
        #expect(listed.count == 1 && listed[0].owner.flatMap { Base64URL.decode($0, length: 32) } != nil)
    }
}
