/// A share link's blob (Docs/LINKS.md, "Blob"): an 8-byte header, then the plaintext
/// stream (u32 length ‖ META ‖ content) in 64 KiB chunks, each sealed with AES-256-GCM.
///
/// AES-GCM because a browser's WebCrypto has it, so the page carries no cipher of its own.
/// The chunking is the payload stream's (FORMAT §7): the nonce is the chunk's counter and a
/// last-chunk flag, so chunks cannot be reordered, dropped or spliced from another link, and
/// a blob cut at a chunk boundary fails on its new last chunk. The header is every chunk's
/// additional data, so a changed version fails too. K is fresh for each link, so counter
/// nonces never repeat under one key.
public enum LinkStream {
    /// "VLNK", version 1, three reserved zero bytes.
    public static let header: [UInt8] = [0x56, 0x4C, 0x4E, 0x4B, 0x01, 0x00, 0x00, 0x00]
    /// Plaintext bytes in every chunk but the last.
    public static let chunkLength = 65536
    static let sealedChunkLength = chunkLength + AESGCMChunkCipher.tagLength

    /// The blob's length for `length` bytes of plaintext stream.
    public static func blobLength(plaintext length: UInt64) -> UInt64 {
        let chunks = max(1, (length + UInt64(chunkLength) - 1) / UInt64(chunkLength))
        return UInt64(header.count) + length + chunks * UInt64(AESGCMChunkCipher.tagLength)
    }

    /// Whether a blob of `length` bytes is laid out as one (what a relay checks before it
    /// stores one; whether it opens is for the key holder to find).
    public static func isValidBlobLength(_ length: UInt64) -> Bool {
        guard length >= UInt64(header.count) + UInt64(AESGCMChunkCipher.tagLength) + 4 + 2 else { return false }
        let rest = (length - UInt64(header.count)) % UInt64(sealedChunkLength)
        return rest == 0 || rest >= UInt64(AESGCMChunkCipher.tagLength)
    }

    static func nonce(_ index: UInt64, last: Bool) -> [UInt8] {
        var nonce = [UInt8](repeating: 0, count: AESGCMChunkCipher.nonceLength)
        for i in 0..<8 { nonce[3 + i] = UInt8(truncatingIfNeeded: index >> (56 - 8 * UInt64(i))) }
        nonce[11] = last ? 1 : 0
        return nonce
    }

    /// Seals `meta` and everything `content` holds under `key` (K), handing the blob to
    /// `output` a chunk at a time. Returns the content's length.
    @discardableResult
    public static func seal(meta: LinkMeta, content: inout some ByteSource, key: SecureBytes,
                            output: (UnsafeRawBufferPointer) throws -> Void) throws -> UInt64 {
        let cipher = key.withUnsafeBytes { AESGCMChunkCipher(key: $0, sealing: true) }
        // One byte more than a chunk: a full chunk is the last exactly when nothing follows.
        let window = SecureBytes(count: chunkLength + 1)
        var sealed = [UInt8](repeating: 0, count: sealedChunkLength)
        let described = meta.encoded
        var filled = 4 + described.count
        window.withUnsafeMutableBytes { window in
            for i in 0..<4 { window[i] = UInt8(truncatingIfNeeded: UInt32(described.count) >> (24 - 8 * UInt32(i))) }
            window.baseAddress!.advanced(by: 4).copyMemory(from: described, byteCount: described.count)
        }
        try header.withUnsafeBytes { try output($0) }
        var index: UInt64 = 0, contentLength: UInt64 = 0
        while true {
            let read = try window.withUnsafeMutableBytes { try content.fill(UnsafeMutableRawBufferPointer(rebasing: $0[filled...])) }
            contentLength += UInt64(read)
            filled += read
            let last = filled <= chunkLength
            let count = min(filled, chunkLength)
            let nonce = Self.nonce(index, last: last)
            try window.withUnsafeMutableBytes { window in
                try sealed.withUnsafeMutableBytes { out in
                    let target = UnsafeMutableRawBufferPointer(rebasing: out[..<(count + AESGCMChunkCipher.tagLength)])
                    nonce.withUnsafeBytes { nonce in
                        cipher.seal(UnsafeRawBufferPointer(rebasing: window[..<count]), nonce: nonce, additionalData: header, into: target)
                    }
                    try output(UnsafeRawBufferPointer(target))
                }
                if !last { window[0] = window[chunkLength] }
            }
            if last { return contentLength }
            filled = 1
            index += 1
        }
    }
}
