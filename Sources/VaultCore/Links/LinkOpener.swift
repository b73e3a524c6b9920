/// Opens a share link's blob as it streams in (Docs/LINKS.md, "Blob"): each chunk is
/// authenticated before any of its plaintext is handed on, and the whole only at
/// ``finish()``, which fails on a blob cut short. A caller that must show nothing of a
/// damaged link keeps what it was handed aside until then (a hidden file, locked memory).
public final class LinkOpener {
    private let cipher: AESGCMChunkCipher
    private let bodyLength: UInt64
    private let metaReady: (LinkMeta) throws -> Void
    private let content: (UnsafeRawBufferPointer) throws -> Void
    private var header: [UInt8] = []
    private var sealed: [UInt8] = []
    private let plain = SecureBytes(count: LinkStream.chunkLength)
    private var index: UInt64 = 0
    private var opened: UInt64 = 0
    private var meta: LinkMeta?

    /// Ready for a blob of `blobLength` bytes, as its server announced; `metaReady` hears
    /// what it holds before `content` gets any of it.
    public init(key: SecureBytes, blobLength: UInt64, metaReady: @escaping (LinkMeta) throws -> Void,
                content: @escaping (UnsafeRawBufferPointer) throws -> Void) throws(VaultError) {
        guard LinkStream.isValidBlobLength(blobLength) else { throw .damaged(what: "the link", detail: "its content has an impossible length") }
        cipher = key.withUnsafeBytes { AESGCMChunkCipher(key: $0, sealing: false) }
        bodyLength = blobLength - UInt64(LinkStream.header.count)
        self.metaReady = metaReady
        self.content = content
        sealed.reserveCapacity(LinkStream.sealedChunkLength)
    }

    /// The next bytes of the blob.
    public func take(_ bytes: UnsafeRawBufferPointer) throws {
        var rest = bytes[...]
        if header.count < LinkStream.header.count {
            let part = min(rest.count, LinkStream.header.count - header.count)
            header += rest.prefix(part)
            rest = rest.dropFirst(part)
            if header.count == LinkStream.header.count, header != LinkStream.header {
                throw header.prefix(4) == LinkStream.header.prefix(4)
                    ? VaultError.unsupportedVersion(what: "the link", version: header[4], supported: LinkStream.header[4])
                    : VaultError.damaged(what: "the link", detail: "its content is not a vault link")
            }
        }
        while !rest.isEmpty {
            let want = pieceLength(index) - sealed.count
            let part = min(rest.count, want)
            sealed += rest.prefix(part)
            rest = rest.dropFirst(part)
            guard sealed.count == pieceLength(index) else { continue }
            guard !isLast(index) || rest.isEmpty else { throw VaultError.damaged(what: "the link", detail: "bytes follow its end") }
            try openPiece()
        }
    }

    /// Checks that the whole blob came and held a description; returns it.
    public func finish() throws -> LinkMeta {
        guard let meta, opened == bodyLength else { throw VaultError.truncated(what: "the link's content") }
        return meta
    }

    private var pieces: UInt64 { (bodyLength + UInt64(LinkStream.sealedChunkLength) - 1) / UInt64(LinkStream.sealedChunkLength) }
    private func isLast(_ i: UInt64) -> Bool { i + 1 == pieces }
    private func pieceLength(_ i: UInt64) -> Int {
        Int(min(UInt64(LinkStream.sealedChunkLength), bodyLength - i * UInt64(LinkStream.sealedChunkLength)))
    }

    private func openPiece() throws {
        let count = sealed.count - AESGCMChunkCipher.tagLength
        let nonce = LinkStream.nonce(index, last: isLast(index))
        let ok = sealed.withUnsafeBytes { sealed in
            nonce.withUnsafeBytes { nonce in
                plain.withUnsafeMutableBytes { plain in
                    cipher.open(sealed, nonce: nonce, additionalData: LinkStream.header, into: UnsafeMutableRawBufferPointer(rebasing: plain[..<count]))
                }
            }
        }
        guard ok else { throw VaultError.damaged(what: "the link", detail: "the key is wrong or the content was damaged") }
        opened += UInt64(sealed.count)
        sealed.removeAll(keepingCapacity: true)
        var start = 0
        if index == 0 {
            // The description is within the first chunk: it is at most 4100 bytes, and the
            // first chunk holds 65536 unless it is the only one.
            let length = plain.withUnsafeBytes { p in count >= 4 ? Int(p[0]) << 24 | Int(p[1]) << 16 | Int(p[2]) << 8 | Int(p[3]) : -1 }
            guard length >= 2, length <= LinkMeta.maximumLength, 4 + length <= count else {
                throw VaultError.damaged(what: "the link", detail: "its description is not valid")
            }
            let parsed = try plain.withUnsafeBytes { try LinkMeta(parsing: Array($0[4..<(4 + length)])) }
            meta = parsed
            try metaReady(parsed)
            start = 4 + length
        }
        index += 1
        if count > start { try plain.withUnsafeBytes { try content(UnsafeRawBufferPointer(rebasing: $0[start..<count])) } }
    }
}
