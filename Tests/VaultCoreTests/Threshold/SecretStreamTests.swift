import CSodium
import Testing
@testable import VaultCore
import VaultTestSupport

@Suite struct SecretStreamTests {
    func seal(_ data: [UInt8], key: SecureBytes, writes: Int = 1) throws -> [UInt8] {
        var out: [UInt8] = []
        let sealer = try StreamSealer(key: key) { out += $0 }
        try feed(data, step: max(1, data.count / writes), to: sealer.write)
        try sealer.finish()
        return out
    }

    func open(_ sealed: [UInt8], key: SecureBytes, step: Int = 10_000) throws -> [UInt8] {
        var out: [UInt8] = []
        let opener = StreamOpener(key: key) { out += $0 }
        try feed(sealed, step: step, to: opener.write)
        try opener.finish()
        return out
    }

    @Test(arguments: [0, 1, 65535, 65536, 65537, 3 * 65536, 200_000])
    func roundTripsWithDerivableLengths(length: Int) throws {
        let key = SecureRandom().secureBytes(32)
        let data = SecureRandom().bytes(length)
        let sealed = try seal(data, key: key, writes: 7)
        #expect(UInt64(sealed.count) == SecretStream.sealedLength(plaintext: UInt64(length)))
        #expect(SecretStream.plaintextLength(sealed: UInt64(sealed.count)) == UInt64(length))
        #expect(try open(sealed, key: key) == data)
        #expect(try open(sealed, key: key, step: 1) == data || length > 70_000)
    }

    /// Finding 15: vault writes MESSAGE then FINAL only; a chunk tagged PUSH or REKEY (the
    /// first one here) is a second encoding and is refused.
    @Test(arguments: [crypto_secretstream_xchacha20poly1305_TAG_PUSH, crypto_secretstream_xchacha20poly1305_TAG_REKEY])
    func refusesAChunkTaggedPushOrRekey(tag: Int32) throws {
        let key = SecureRandom().secureBytes(32)
        let stream = CraftedDeal.sealed(chunks: [(Array(repeating: 1, count: 65536), tag),
                                                 (Array(repeating: 2, count: 10), Int32(crypto_secretstream_xchacha20poly1305_TAG_FINAL))],
                                        key: key)
        #expect(throws: SecretStream.Failure.self) { try open(stream, key: key) }
    }

    @Test func refusesTamperingTruncationAndTrailingData() throws {
        let key = SecureRandom().secureBytes(32)
        let sealed = try seal(SecureRandom().bytes(150_000), key: key)
        var flipped = sealed
        flipped[100_000] ^= 1
        #expect(throws: SecretStream.Failure.forged) { try open(flipped, key: key) }
        // Cut at the chunk boundary: every remaining chunk authenticates, but none is FINAL.
        let cut = SecretStream.headerLength + 2 * SecretStream.sealedChunkLength
        #expect(throws: SecretStream.Failure.truncated) { try open(Array(sealed[0..<cut]), key: key) }
        #expect(throws: SecretStream.Failure.forged) { try open(Array(sealed.dropLast(1)), key: key) }
        // Bytes after a short final chunk merge with it and fail to authenticate; after a
        // full final chunk they are recognised as trailing data.
        #expect(throws: SecretStream.Failure.forged) { try open(sealed + sealed[24..<24 + 40], key: key) }
        let full = try seal(SecureRandom().bytes(2 * 65536), key: key)
        #expect(throws: SecretStream.Failure.trailingData) { try open(full + full[24..<24 + 40], key: key) }
        #expect(throws: SecretStream.Failure.forged) { try open(sealed, key: SecureRandom().secureBytes(32)) }
        #expect(throws: SecretStream.Failure.truncated) { try open(Array(sealed[0..<20]), key: key) }
        #expect(SecretStream.plaintextLength(sealed: 30) == nil)
    }
}
