import Testing
@testable import VaultCore
import VaultTestSupport

/// FORMAT §7: the payload stream, AES-256-GCM chunks under counter ‖ last-flag nonces.
@Suite struct PayloadStreamTests {
    func seal(_ data: [UInt8], key: SecureBytes, step: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        let sealer = PayloadSealer(key: key) { out += $0 }
        try feed(data, step: step, to: sealer.write)
        try sealer.finish()
        return out
    }

    func open(_ sealed: [UInt8], key: SecureBytes, step: Int = 10_000) throws -> [UInt8] {
        var out: [UInt8] = []
        let opener = PayloadOpener(key: key) { out += $0 }
        try feed(sealed, step: step, to: opener.write)
        try opener.finish()
        return out
    }

    /// Lengths around a chunk and several chunks, fed in odd steps.
    @Test(arguments: [0, 1, 65535, 65536, 65537, 3 * 65536, 200_000, 8 * 65536, 8 * 65536 + 1, 17 * 65536 + 5])
    func roundTripsWithDerivableLengths(length: Int) throws {
        let key = SecureRandom().secureBytes(32)
        let data = SecureRandom().bytes(length)
        let sealed = try seal(data, key: key, step: 9_999)
        #expect(UInt64(sealed.count) == PayloadStream.sealedLength(plaintext: UInt64(length)))
        #expect(PayloadStream.plaintextLength(sealed: UInt64(sealed.count)) == UInt64(length))
        #expect(try open(sealed, key: key, step: 70_001) == data)
        #expect(try seal(data, key: key, step: max(1, length)) == sealed, "the same key and plaintext seal alike, however fed")
    }

    /// The chunks are the §7 construction, chunk by chunk: an independent AES-GCM of each
    /// chunk under its counter and flag gives the same bytes.
    @Test func chunksAreCounterNoncedAESGCM() throws {
        let key = SecureRandom().secureBytes(32)
        let data = SecureRandom().bytes(2 * 65536 + 100)
        let expected = CraftedDeal.payload(chunks: [(Array(data[0..<65536]), 0, false), (Array(data[65536..<131072]), 1, false),
                                                    (Array(data[131072...]), 2, true)], key: key)
        #expect(try seal(data, key: key, step: 5000) == expected)
        #expect(PayloadStream.nonce(0x0102, last: true) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 1])
    }

    @Test func refusesTamperingReorderingTruncationAndExtension() throws {
        let key = SecureRandom().secureBytes(32)
        let chunk = PayloadStream.sealedChunkLength
        // Ten chunks, so failures in the middle and in the final chunk are both seen.
        let sealed = try seal(SecureRandom().bytes(10 * 65536 + 7), key: key, step: 65536)
        var flipped = sealed
        flipped[3 * chunk + 5] ^= 1
        #expect(throws: SecretStream.Failure.forged) { try open(flipped, key: key) }
        // Two chunks swapped: each authenticates only at its own counter.
        let swapped = Array(sealed[0..<chunk]) + Array(sealed[2 * chunk..<3 * chunk]) + Array(sealed[chunk..<2 * chunk]) + Array(sealed[(3 * chunk)...])
        #expect(throws: SecretStream.Failure.forged) { try open(swapped, key: key) }
        // Cut at a chunk boundary: every chunk left authenticates, but none is the last.
        for cut in [2, 8, 9] {
            #expect(throws: SecretStream.Failure.truncated) { try open(Array(sealed[0..<cut * chunk]), key: key) }
        }
        #expect(throws: SecretStream.Failure.forged) { try open(Array(sealed.dropLast(1)), key: key) }
        // A chunk after the last: the last one no longer ends the stream.
        let full = try seal(SecureRandom().bytes(2 * 65536), key: key, step: 65536)
        let extra = CraftedDeal.payload(chunks: [([1, 2, 3], 2, true)], key: key)
        #expect(throws: SecretStream.Failure.trailingData) { try open(full + extra, key: key) }
        #expect(throws: SecretStream.Failure.forged) { try open(sealed, key: SecureRandom().secureBytes(32)) }
        #expect(throws: SecretStream.Failure.truncated) { try open(Array(sealed[0..<15]), key: key) }
        #expect(throws: SecretStream.Failure.truncated) { try open([], key: key) }
        #expect(PayloadStream.plaintextLength(sealed: 15) == nil)
        #expect(PayloadStream.plaintextLength(sealed: UInt64(chunk + 3)) == nil)
        // An empty chunk after a full one is never written, so no header may claim one.
        #expect(PayloadStream.plaintextLength(sealed: UInt64(chunk + 16)) == nil)
        #expect(PayloadStream.plaintextLength(sealed: 16) == 0)
    }
}
