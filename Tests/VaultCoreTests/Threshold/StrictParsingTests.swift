import CSodium
import Foundation
import Testing
@testable import VaultCore
import VaultTestSupport

/// Three holders who trust each other; alice deals by hand what SecretDealer never writes
/// but a hostile or buggy dealer could: every such bundle is signed and committed, so only
/// the strictness of the readers stands between it and the user.
final class CraftedDeal {
    let temporary: TemporaryDirectory
    let keystores: [Keystore]
    let identities: [Identity]

    init() throws {
        let temporary = TemporaryDirectory("vault-strict")
        self.temporary = temporary
        keystores = try ["alice", "bob", "carol"].map {
            try Keystore.create(home: VaultHome(directory: temporary.file($0)), label: Label($0), passphrase: nil)
        }
        identities = try keystores.map { try $0.unlock(passphrase: nil) }
        for (i, keystore) in keystores.enumerated() {
            for (j, identity) in identities.enumerated() where i != j {
                try keystore.addPeer(identity.card, label: identity.label, address: nil)
            }
        }
    }

    /// A §7 payload stream of `plaintext` under `key`, as SecretDealer writes it.
    static func sealed(_ plaintext: [UInt8], key: SecureBytes) throws -> [UInt8] {
        var out: [UInt8] = []
        let sealer = PayloadSealer(key: key) { out += $0 }
        try plaintext.withUnsafeBytes { try sealer.write($0) }
        try sealer.finish()
        return out
    }

    /// A §7 payload stream chunk by chunk, each with the counter and last flag given.
    static func payload(chunks: [(plain: [UInt8], index: UInt64, last: Bool)], key: SecureBytes) -> [UInt8] {
        let cipher = key.withUnsafeBytes { AESGCMChunkCipher(key: $0, sealing: true) }
        return chunks.flatMap { chunk in
            var out = [UInt8](repeating: 0, count: chunk.plain.count + PayloadStream.tagLength)
            chunk.plain.withUnsafeBytes { plain in
                PayloadStream.nonce(chunk.index, last: chunk.last).withUnsafeBytes { nonce in
                    out.withUnsafeMutableBytes { cipher.seal(plain, nonce: nonce, into: $0) }
                }
            }
            return out
        }
    }

    /// A secretstream with the tags given, chunk by chunk (libsodium directly).
    static func sealed(chunks: [([UInt8], Int32)], key: SecureBytes) -> [UInt8] {
        var state = crypto_secretstream_xchacha20poly1305_state()
        var header = [UInt8](repeating: 0, count: SecretStream.headerLength)
        key.withUnsafeBytes { k in
            _ = crypto_secretstream_xchacha20poly1305_init_push(&state, &header, k.bindMemory(to: UInt8.self).baseAddress!)
        }
        var out = header
        for (plain, tag) in chunks {
            var chunk = [UInt8](repeating: 0, count: plain.count + SecretStream.overhead)
            _ = crypto_secretstream_xchacha20poly1305_push(&state, &chunk, nil, plain, UInt64(plain.count), nil, 0, UInt8(tag))
            out += chunk
        }
        return out
    }

    /// Deals 2 of 3 from `dispersed`, the bytes given to the dispersal, while the header
    /// states `ciphertextLength` (so the last stripe's padding is the test's choice).
    /// Returns the three bundle files.
    func deal(type: SecretType = .note, passwordFlag: Bool = false, dataKey: SecureBytes, dispersed: [UInt8],
              ciphertextLength: UInt64) throws -> [String] {
        let k = 2, n = 3, random = SecureRandom()
        let secretID = random.bytes(16)
        let keyShares = Shamir.split(dataKey, threshold: k, count: n, random: random)
        var pieces = [[UInt8]](repeating: [], count: n)
        let encoder = Dispersal.Encoder(k: k, n: n) { segments in
            for j in 0..<n { pieces[j] += segments[j] }
        }
        try dispersed.withUnsafeBytes { try encoder.write($0) }
        try encoder.finish()
        let commitments = pieces.map { piece in
            let hasher = PieceHasher(threshold: k)
            piece.withUnsafeBytes { hasher.update($0) }
            return hasher.finish()
        }
        let possessionKeys = (0..<n).map {
            BundleHeader.possessionKeyPair(secretID: secretID, index: $0 + 1, keyShare: keyShares[$0], commitment: commitments[$0]).publicKey
        }
        let cards = identities.map(\.card)
        return try (0..<n).map { j in
            let oneTime = OneTimeKey(random: random)
            let header = BundleHeader(
                secretID: secretID, createdAt: 0, type: type, description: "crafted", threshold: k, count: n, holderIndex: j + 1,
                ciphertextLength: ciphertextLength, dealer: cards[0], holderKey: cards[j].agreementKey, senderKey: oneTime.publicKey,
                passwordProtected: passwordFlag,
                replaces: nil, keyID: type == .key ? secretID : nil, labels: nil, commitments: commitments,
                possessionKeys: possessionKeys, holderTags: cards.map { BundleHeader.holderTag(secretID: secretID, agreementKey: $0.agreementKey) })
            let bundle = ShareBundle.prefix(header: header, signer: identities[0])
                + ShareBundle.sealBox(keyShare: keyShares[j], header: header, oneTime: oneTime, random: random)
                + pieces[j]
            return try temporary.write("crafted-\(UUID().uuidString)-\(j + 1).vshare", bundle)
        }
    }

    /// Deals `outer` (the threshold layer's plaintext) as SecretDealer would, padding aside.
    func deal(type: SecretType = .note, passwordFlag: Bool = false, outer: [UInt8], padding: [UInt8] = []) throws -> [String] {
        let dataKey = SecureRandom().secureBytes(32)
        let ciphertext = try Self.sealed(outer, key: dataKey)
        return try deal(type: type, passwordFlag: passwordFlag, dataKey: dataKey, dispersed: ciphertext + padding,
                        ciphertextLength: UInt64(ciphertext.count))
    }

    /// bob imports his bundle, carol hers and releases her piece to bob, and bob recovers.
    func recover(_ bundles: [String], release: ((String) throws -> String)? = nil,
                 verified: (PieceOutcome) -> Void = { _ in }, output: @escaping (UnsafeRawBufferPointer) -> Void = { _ in }) throws -> [UInt8] {
        let bob = keystores[1], carol = keystores[2]
        let stored = try bob.importBundles([bundles[1]], identity: identities[1])[0]
        let carols = try carol.importBundles([bundles[2]], identity: identities[2])[0]
        let piece = try OutputFile(path: temporary.file("piece-\(UUID().uuidString)"))
        try ReleasedPiece.release(carols, to: carol.peer(named: "bob"), keystore: carol, identity: identities[2], output: piece)
        try piece.commit()
        let path = try release?(piece.path) ?? piece.path
        var out: [UInt8] = []
        _ = try SecretRecovery.recover(stored, keystore: bob, identity: identities[1], pieceFiles: [path],
                                       password: { SecureBytes(copying: Array("pw".utf8)) }, verified: verified,
                                       output: { out += $0; output($0) })
        return out
    }
}

@Suite struct StrictParsingTests {
    /// A note "hello" as the threshold layer's plaintext: no password layer, type 1, no fields.
    static let note: [UInt8] = [0x00, 0x01, 0x00, 0x00] + Array("hello".utf8)

    @Test func aCraftedDealOpensWhenItIsCanonical() throws {
        let deal = try CraftedDeal()
        #expect(try deal.recover(deal.deal(outer: Self.note)) == Array("hello".utf8))
    }

    /// Finding 15: the dealer zero-pads each stripe; any other padding is a second encoding
    /// of the same ciphertext and is refused.
    @Test func nonZeroPaddingOfAStripeIsRefused() throws {
        let deal = try CraftedDeal()
        // 9 + 16 = 25 ciphertext bytes: at k = 2 the last stripe has one byte of padding.
        let bundles = try deal.deal(outer: Self.note, padding: [0x5A])
        #expect(throws: VaultError.corruptSecret("a stripe's padding is not zero")) { try deal.recover(bundles) }
    }

    /// Finding 15: the header's public password flag must say what the payload does.
    @Test func aPasswordFlagThatDisagreesWithThePayloadIsRefused() throws {
        let deal = try CraftedDeal()
        let bundles = try deal.deal(passwordFlag: true, outer: Self.note)
        #expect(throws: VaultError.corruptSecret("its password layer disagrees with the signed header")) { try deal.recover(bundles) }
    }

    /// Finding 15: a key is 32 bytes; a 16-byte one is refused by the dealer and on recovery.
    @Test func aKeyShorterThan32BytesIsRefused() throws {
        let deal = try CraftedDeal()
        let bundles = try deal.deal(type: .key, outer: [0x00, 0x05, 0x00, 0x00] + Array(repeating: 7, count: 16))
        #expect(throws: VaultError.badKey) { try deal.recover(bundles) }
        let source = BytesSource(Array(repeating: 7, count: 16))
        let outputs = try (0..<2).map { try OutputFile(path: deal.temporary.file("short-\($0)")) }
        let request = try ShareRequest(type: .key, threshold: 2, holders: [(Label("bob"), deal.identities[1].card)])
        #expect(throws: VaultError.invalidSecret("a key is 32 bytes, and this one has 16")) {
            try SecretDealer.share(request, content: source, dealer: deal.identities[0], outputs: outputs)
        }
    }

    /// Finding 16: a ciphertext stream with its first chunk of two marked last is refused in
    /// words, not as "keystore error: trailingData". (Pieces are no longer streams of their
    /// own since format version 2: the ciphertext is the one stream.)
    @Test func anEarlyFinalChunkIsReportedInWords() throws {
        let deal = try CraftedDeal()
        let dataKey = SecureRandom().secureBytes(32)
        let plain = [0x00, 0x01, 0x00, 0x00] + Array(repeating: 0x41, count: 140_000) as [UInt8]
        let ciphertext = CraftedDeal.payload(chunks: [(Array(plain[0..<65536]), 0, true), (Array(plain[65536...]), 1, true)], key: dataKey)
        let bundles = try deal.deal(dataKey: dataKey, dispersed: ciphertext, ciphertextLength: UInt64(ciphertext.count))
        do {
            _ = try deal.recover(bundles)
            Issue.record("a ciphertext with an early FINAL chunk was recovered")
        } catch {
            #expect(VaultError.words(for: error) == "the secret is corrupt: the ciphertext has data after its final chunk")
        }
    }

    /// Recovery from exactly k pieces reads each once, hashing it while it combines. A
    /// dealer's forged chunk in the ciphertext (pieces that all match the signed
    /// commitments) is found by the cipher; the pieces are then checked, found sound, and
    /// the ciphertext is blamed. The output saw the chunks before the forged one, once: the
    /// combination is not run a second time after the check.
    /// (Chunk 9 of 20 fails while the stream is read, chunk 10 of 10 at its end.)
    @Test(arguments: [(forged: 9, chunks: 20), (forged: 9, chunks: 10)])
    func aForgedChunkInTheCiphertextIsRefusedAndNothingIsWrittenTwice(forged: Int, chunks: Int) throws {
        let deal = try CraftedDeal()
        let dataKey = SecureRandom().secureBytes(32)
        let plain = [0x00, 0x01, 0x00, 0x00] + Array(repeating: 0x41, count: (chunks - 1) * PayloadStream.chunkLength + 100) as [UInt8]
        var ciphertext = try CraftedDeal.sealed(plain, key: dataKey)
        // The chunks before the forged one are opened and written, once.
        ciphertext[forged * PayloadStream.sealedChunkLength + 7] ^= 1
        let bundles = try deal.deal(dataKey: dataKey, dispersed: ciphertext, ciphertextLength: UInt64(ciphertext.count))
        var written = 0
        var outcomes: [PieceOutcome] = []
        do {
            _ = try deal.recover(bundles, verified: { outcomes.append($0) }, output: { written += $0.count })
            Issue.record("a forged chunk was recovered")
        } catch {
            #expect(VaultError.words(for: error) == "the secret is corrupt: the ciphertext does not authenticate (a wrong key, or altered data)")
        }
        #expect(outcomes.count == 2 && outcomes.allSatisfy { $0.problem == nil })
        #expect(written == forged * PayloadStream.chunkLength - 4)
    }

    /// A release damaged on the way, among exactly k: the single pass fails (a short read
    /// leaves its stage holding a buffer set, which must not trap), and the check that
    /// follows names the piece, blaming nobody, and reports too few pieces, as the
    /// piece-by-piece check always did.
    @Test(arguments: [
        ("a byte of its piece altered after its sender signed it", "damaged: its piece was altered after its sender signed it"),
        ("cut well inside its piece", "damaged: it is truncated"),
    ])
    func aDamagedReleaseAmongExactlyKIsNamed(damage: String, problem: String) throws {
        let deal = try CraftedDeal()
        let bundles = try deal.deal(outer: Self.note + Array(repeating: 0x42, count: 300_000))
        var outcomes: [PieceOutcome] = []
        #expect(throws: VaultError.self) {
            _ = try deal.recover(bundles, release: { path in
                var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
                if damage.hasPrefix("cut") { bytes.removeLast(70_000) } else { bytes[bytes.count - 64 - 1000] ^= 1 }
                return try deal.temporary.write("damaged-\(UUID().uuidString)", bytes)
            }, verified: { outcomes.append($0) })
        }
        #expect(outcomes.map(\.problem) == [nil, problem])
    }

    /// Finding 14 (and the format v2 review): a release under a card with carol's X25519 key
    /// and another Ed25519 key, signed with that Ed25519 key. The signature proves only the
    /// Ed25519 half: a known signer (alice) is named as the forger, never carol, whose key
    /// was only claimed; an unknown signer is named by nobody.
    @Test(arguments: [true, false])
    func aSenderCardWithAnotherSigningKeyNamesItsSignerNeverTheClaimedHolder(signerKnown: Bool) throws {
        let deal = try CraftedDeal()
        let bundles = try deal.deal(outer: Self.note)
        let carol = deal.identities[2], bob = deal.identities[1]
        let signer = signerKnown ? deal.identities[0] : Identity.generate(label: try Label("mallory"), random: SecureRandom()).0
        var outcomes: [PieceOutcome] = []
        #expect(throws: VaultError.self) {
            _ = try deal.recover(bundles, release: { honest in
                let stored = try deal.keystores[1].secrets()[0]
                let opened = try ReleasedPiece.open(path: honest, secret: stored.header, identity: bob)
                let masked = try KeyCard(encoded: [KeyCard.version] + carol.card.agreementKey + signer.card.signingKey)
                // Signed by the masked card's own signing key, so the signature holds.
                let oneTime = OneTimeKey(random: SecureRandom())
                let header = ReleasedPiece.Header(secretID: opened.header.secretID, from: opened.header.from, to: opened.header.to,
                                                  sender: masked, recipientKey: opened.header.recipientKey,
                                                  oneTimeKey: oneTime.publicKey, pieceLength: opened.header.pieceLength)
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: honest)))
                var w = ByteWriter()
                w.raw(ReleasedPiece.magic)
                w.u8(ReleasedPiece.version)
                w.u32(UInt32(ReleasedPiece.headerLength))
                w.raw(header.encoded())
                w.raw(signer.sign(ReleasedPiece.signatureDomain + header.encoded()))
                w.raw(Box.seal([opened.keyShare, SecureBytes(copying: header.hash)], to: bob.card.agreementKey,
                               secretKey: oneTime.secretKey, random: SecureRandom()))
                w.raw(bytes[opened.bodyOffset...])
                return try deal.temporary.write("masked.vpiece", w.bytes)
            }, verified: { outcomes.append($0) })
        }
        let released = outcomes.first { $0.index == 3 }
        if signerKnown {
            #expect(released?.sender == signer.card)
            #expect(released?.problem == "forged: its signer claims holder 3's key, which is not its own")
        } else {
            #expect(released != nil && released?.sender == nil)
            #expect(released?.problem == "forged: it is signed by a key not known for holder 3")
        }
    }

    /// Finding 13: a signed header whose label is not in NFC (e + U+0301, U+212B) is refused
    /// as it is read; re-encoding it would hash bytes the dealer never signed.
    @Test(arguments: [[0x65, 0xCC, 0x81], [0xE2, 0x84, 0xAB]] as [[UInt8]])
    func aHeaderLabelNotInNFCIsRefused(label: [UInt8]) throws {
        let deal = try CraftedDeal()
        var encoded = try Self.header(deal, labels: ["xyz", "bob", "carol"]).encoded()
        let at = try #require(encoded.indices.first { encoded[$0] == 3 && Array(encoded[$0 + 1..<$0 + 4]) == Array("xyz".utf8) })
        encoded.replaceSubrange(at + 1..<at + 4, with: label)
        #expect(throws: VaultError.malformed(what: "the share bundle", detail: "a label is not in Unicode NFC")) {
            try Self.parseSigned(encoded, by: deal.identities[0])
        }
    }

    /// Finding 16: a description that is not UTF-8 is named as such, in words.
    @Test func aDescriptionNotInUTF8IsNamed() throws {
        let deal = try CraftedDeal()
        var encoded = try Self.header(deal, labels: nil).encoded()
        // secret id (16) ‖ created (8) ‖ type (1) ‖ description length (2) ‖ "crafted"
        encoded[27] = 0xFF
        #expect(throws: VaultError.malformed(what: "the share bundle", detail: "the description is not UTF-8")) {
            try Self.parseSigned(encoded, by: deal.identities[0])
        }
    }

    static func header(_ deal: CraftedDeal, labels: [String]?) throws -> BundleHeader {
        let zero = [[UInt8]](repeating: [UInt8](repeating: 0, count: 32), count: 3)
        return BundleHeader(
            secretID: Array(repeating: 9, count: 16), createdAt: 0, type: .note, description: "crafted", threshold: 2, count: 3,
            holderIndex: 2, ciphertextLength: 100, dealer: deal.identities[0].card, holderKey: deal.identities[1].card.agreementKey,
            senderKey: zero[0], passwordProtected: false, replaces: nil, keyID: nil, labels: try labels?.map { try Label($0) }, commitments: zero,
            possessionKeys: zero, holderTags: zero)
    }

    /// Parses a header signed as the dealer would sign it, through the bundle's prefix.
    @discardableResult
    static func parseSigned(_ encoded: [UInt8], by dealer: Identity) throws -> BundleHeader {
        var w = ByteWriter()
        w.raw(ShareBundle.magic)
        w.u8(ShareBundle.version)
        w.u32(UInt32(encoded.count))
        w.raw(encoded)
        w.raw(dealer.sign(ShareBundle.signatureDomain + encoded))
        var offset = 0
        let bytes = w.bytes
        return try ShareBundle.parsePrefix { count in
            defer { offset += count }
            return Array(bytes[min(offset, bytes.count)..<min(bytes.count, offset + count)])
        }.0
    }

    /// Finding 11: 64 fields of 4096 bytes do not fit the 2-byte metadata length; refused
    /// with a clear error before anything is encrypted, not trapped on in the writer.
    @Test func metadataLongerThanItsLengthFieldIsRefused() throws {
        let long = SecretMetadata(contactName: "x", phones: Array(repeating: String(repeating: "5", count: 4096), count: 16))
        #expect(throws: VaultError.invalidSecret("the fields take 65588 bytes, more than 65535")) { try long.validate() }
        let fits = SecretMetadata(contactName: "x", phones: Array(repeating: String(repeating: "5", count: 4096), count: 15))
        try fits.validate()
    }

    /// The fuzz seeds for findings 11 and 13 (Fuzz/Corpus), through the calls their targets
    /// make: the 255-byte label parses and re-encodes to itself, the non-NFC label is refused,
    /// and a payload claiming 65535 bytes of metadata is refused without a trap.
    @Test func reviewSeedsInTheFuzzCorpora() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz/Corpus")
        func seed(_ path: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: corpus.appendingPathComponent(path))) }
        let wide = try seed("FuzzBundle/label-255-bytes.bin")
        let header = try BundleHeader(parsing: wide)
        #expect(header.labels?[1].value.utf8.count == 255 && header.encoded() == wide)
        #expect(throws: VaultError.malformed(what: "the share bundle", detail: "a label is not in Unicode NFC")) {
            try BundleHeader(parsing: seed("FuzzBundle/label-not-nfc.bin"))
        }
        let payload = PayloadParser(expectedType: SecretType.contact.rawValue) { _ in }
        let layer = PasswordLayerParser(payload: payload) { SecureBytes(copying: Array("password".utf8)) }
        #expect(throws: VaultError.corruptSecret("its header is incomplete")) {
            try seed("FuzzPasswordLayer/metadata-length-65535.bin").withUnsafeBytes { try layer.write($0) }
            try layer.finish()
        }
    }

    /// Finding 17: the header cap is one a header can reach. The largest header (255
    /// holders with 255-byte labels, a 1024-byte description, a key id and a replaced id)
    /// is exactly the cap, and parses; a length one past it is refused unread.
    @Test func theLargestPossibleHeaderIsTheCap() throws {
        let dealer = Identity.generate(label: try Label("alice"), random: SecureRandom()).0
        let label = try Label(String(repeating: "\u{20000}", count: 63) + "東")
        let zero = [[UInt8]](repeating: [UInt8](repeating: 0, count: 32), count: 255)
        let header = BundleHeader(
            secretID: Array(repeating: 9, count: 16), createdAt: 0, type: .key, description: String(repeating: "d", count: 1024),
            threshold: 2, count: 255, holderIndex: 2, ciphertextLength: 100, dealer: dealer.card, holderKey: Array(repeating: 1, count: 32),
            senderKey: Array(repeating: 2, count: 32), passwordProtected: false, replaces: Array(repeating: 3, count: 16), keyID: Array(repeating: 4, count: 16),
            labels: Array(repeating: label, count: 255), commitments: zero, possessionKeys: zero, holderTags: zero)
        #expect(header.encoded().count == 90986)
        #expect(BundleHeader.maximumLength == 90986)
        #expect(try Self.parseSigned(header.encoded(), by: dealer) == header)
        let tooLong = [UInt8]("VLTB".utf8) + [2, 0, 1, 0x63, 0x6B]  // 90987
        var offset = 0
        #expect(throws: VaultError.malformed(what: "the share bundle", detail: "header too long")) {
            try ShareBundle.parsePrefix { count in
                defer { offset += count }
                return Array(tooLong[min(offset, tooLong.count)..<min(tooLong.count, offset + count)])
            }
        }
    }
}
