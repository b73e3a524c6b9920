import Testing
@testable import VaultCore
import VaultTestSupport

/// The dealer's lanes (DealLanes, OuterPlaintext) at the lengths where the last chunk or
/// a lane's run of chunks changes: the threshold layer's plaintext (4 bytes of headers for a note, then the
/// content) one byte short of, exactly at, and one byte past a multiple of 64 KiB. Each is
/// dealt 2 of 3 by SecretDealer, and recovered by bob from his share and carol's release.
@Suite struct DealLanesTests {
    static let headers = 4

    func dealAndRecover(contentLength: Int, password: Bool = false) throws -> (content: [UInt8], recovered: [UInt8], header: BundleHeader) {
        let deal = try CraftedDeal()
        let content = SecureRandom().bytes(contentLength)
        let outputs = try (0..<3).map { try OutputFile(path: deal.temporary.file("lanes-\($0 + 1).vshare")) }
        let request = try ShareRequest(type: .note, threshold: 2,
                                       holders: [(Label("bob"), deal.identities[1].card), (Label("carol"), deal.identities[2].card)],
                                       password: password ? SecureBytes(copying: Array("pw".utf8)) : nil)
        let header = try SecretDealer.share(request, content: BytesSource(content), dealer: deal.identities[0], outputs: outputs)[0]
        for output in outputs { try output.commit() }
        return (content, try deal.recover(outputs.map(\.path)), header)
    }

    /// Around one chunk, three, and a lane's run of four and eight chunks.
    @Test(arguments: [0, 65536 - headers - 1, 65536 - headers, 65536 - headers + 1,
                      3 * 65536 - headers - 1, 3 * 65536 - headers, 3 * 65536 - headers + 1,
                      4 * 65536 - headers - 1, 4 * 65536 - headers, 4 * 65536 - headers + 1, 8 * 65536 - headers + 1])
    func everyLastChunkRoundTrips(contentLength: Int) throws {
        let (content, recovered, header) = try dealAndRecover(contentLength: contentLength)
        #expect(recovered == content)
        // The last chunk is marked where the plaintext ends: never an empty chunk after a
        // full one, so the ciphertext has the one length §7 allows.
        #expect(header.ciphertextLength == PayloadStream.sealedLength(plaintext: UInt64(Self.headers + contentLength)))
    }

    /// Through the password layer (OuterPlaintext's secretstream path), around its own
    /// chunk boundary too.
    @Test(arguments: [0, 65536, 2 * 65536 + 3])
    func thePasswordLayerRoundTrips(contentLength: Int) throws {
        let (content, recovered, _) = try dealAndRecover(contentLength: contentLength, password: true)
        #expect(recovered == content)
    }
}
