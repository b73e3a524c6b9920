import Foundation
import Testing
@testable import VaultCore

/// The share link's blob (Docs/LINKS.md, "Blob") and its key derivation.
struct LinkStreamTests {
    private func seal(_ content: [UInt8], meta: LinkMeta, key: SecureBytes) throws -> [UInt8] {
        var source = BytesSource(content)
        var blob: [UInt8] = []
        try LinkStream.seal(meta: meta, content: &source, key: key) { blob += $0 }
        return blob
    }

    private func open(_ blob: [UInt8], key: SecureBytes, feed: Int = 7000) throws -> (LinkMeta, [UInt8]) {
        var content: [UInt8] = []
        var seen: LinkMeta?
        let opener = try LinkOpener(key: key, blobLength: UInt64(blob.count), metaReady: { seen = $0 }, content: { content += $0 })
        var offset = 0
        while offset < blob.count {
            let end = min(blob.count, offset + feed)
            try blob[offset..<end].withUnsafeBytes { try opener.take($0) }
            offset = end
        }
        let meta = try opener.finish()
        #expect(seen == meta)
        return (meta, content)
    }

    @Test(arguments: [0, 1, 65535, 65536, 65537, 10_000_000])
    func roundTripsEverySizeEdge(size: Int) throws {
        let key = SecureBytes.random(count: 32)
        let content = SecureRandom().bytes(size)
        let meta = try LinkMeta(kind: .file, name: "report.pdf")
        let blob = try seal(content, meta: meta, key: key)
        #expect(UInt64(blob.count) == LinkStream.blobLength(plaintext: UInt64(4 + meta.encoded.count + size)))
        #expect(LinkStream.isValidBlobLength(UInt64(blob.count)))
        #expect(Array(blob.prefix(8)) == [0x56, 0x4C, 0x4E, 0x4B, 1, 0, 0, 0])
        let (opened, bytes) = try open(blob, key: key)
        #expect(opened == meta)
        #expect(bytes == content)
    }

    @Test func aWrongKeyAFlippedByteATruncationAndAReorderAllFail() throws {
        let key = SecureBytes.random(count: 32)
        let content = SecureRandom().bytes(3 * 65536 + 100)
        let blob = try seal(content, meta: try LinkMeta(kind: .note, name: nil), key: key)
        #expect(throws: VaultError.self) { try open(blob, key: SecureBytes.random(count: 32)) }
        var flipped = blob
        flipped[70_000] ^= 1
        #expect(throws: VaultError.self) { try open(flipped, key: key) }
        // Cut at a chunk boundary: the new last chunk was sealed as not last.
        let cut = Array(blob.prefix(8 + 2 * (65536 + 16)))
        #expect(throws: VaultError.self) { try open(cut, key: key) }
        // Chunks 1 and 2 swapped.
        let piece = 65536 + 16
        var swapped = Array(blob.prefix(8 + piece))
        swapped += blob[(8 + 2 * piece)..<(8 + 3 * piece)]
        swapped += blob[(8 + piece)..<(8 + 2 * piece)]
        swapped += blob[(8 + 3 * piece)...]
        #expect(throws: VaultError.self) { try open(swapped, key: key) }
        // Another version in the header.
        var version = blob
        version[4] = 2
        #expect(throws: VaultError.self) { try open(version, key: key) }
        // A blob that arrives short of the length announced.
        let opener = try LinkOpener(key: key, blobLength: UInt64(blob.count), metaReady: { _ in }, content: { _ in })
        try blob.prefix(100_000).withUnsafeBytes { try opener.take($0) }
        #expect(throws: VaultError.self) { try opener.finish() }
    }

    @Test func impossibleLengthsAreRefusedBeforeAnyByte() {
        for length: UInt64 in [0, 8, 8 + 15, 8 + 65552 + 3] {
            #expect(!LinkStream.isValidBlobLength(length))
            #expect(throws: VaultError.self) { try LinkOpener(key: SecureBytes.random(count: 32), blobLength: length, metaReady: { _ in }, content: { _ in }) }
        }
    }

    /// RFC 5869 test case 1 (first 32 bytes of its OKM) and RFC 7914 §11's PBKDF2-HMAC-SHA-256
    /// (first 32 bytes): what WebCrypto computes for the page.
    @Test func derivationsMatchTheirRFCs() {
        let ikm = [UInt8](repeating: 0x0b, count: 22)
        var okm = [UInt8](repeating: 0, count: 32)
        ikm.withUnsafeBytes { ikm in
            okm.withUnsafeMutableBytes { KeyDerivation.hkdf(ikm: ikm, salt: Array(0...12), info: Array(0xf0...0xf9), into: $0) }
        }
        #expect(okm.hex == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf")
        var dk = [UInt8](repeating: 0, count: 32)
        Array("passwd".utf8).withUnsafeBytes { password in
            dk.withUnsafeMutableBytes { KeyDerivation.pbkdf2(password: password, salt: Array("salt".utf8), iterations: 1, into: $0) }
        }
        #expect(dk.hex == "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc")
    }

    @Test func thePasswordChangesBothKeysAndItsCostIsBounded() throws {
        let fragment = LinkKeys.newFragment(password: true)
        let right = try LinkKeys(fragment: fragment, password: SecureBytes(copying: Array("correct horse".utf8)), iterations: 600_000)
        let wrong = try LinkKeys(fragment: fragment, password: SecureBytes(copying: Array("wrong horse".utf8)), iterations: 600_000)
        #expect(!right.claim.constantTimeEquals(wrong.claim))
        #expect(!right.content.constantTimeEquals(wrong.content))
        #expect(throws: VaultError.self) { try LinkKeys(fragment: fragment, password: SecureBytes(copying: [1]), iterations: 1000) }
        #expect(throws: VaultError.self) { try LinkKeys(fragment: fragment, password: SecureBytes(copying: [1]), iterations: 20_000_000) }
        #expect(throws: VaultError.passwordRequired) { try LinkKeys(fragment: fragment, password: nil, iterations: 0) }
        let plain = try LinkKeys(fragment: LinkKeys.newFragment(password: false), password: nil, iterations: 0)
        #expect(!plain.claim.constantTimeEquals(plain.content))
    }
}
