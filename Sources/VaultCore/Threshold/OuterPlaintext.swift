/// The threshold layer's plaintext (FORMAT §10) read as a stream, for ``DealLanes`` to pull
/// chunks from: the layer's header, then the payload (its header and the content), sealed
/// under the password key when there is a password layer.
///
/// Without a password the content is read straight into the caller's buffer, with no copy
/// on the way. With one, the content goes through the secretstream, and what it emits waits
/// in locked memory until it is read.
final class OuterPlaintext<Content: ByteSource>: ByteSource {
    private var content: Content
    private var inner: StreamSealer?
    /// Bytes made and not yet read: the headers, and the password layer's output.
    private let waiting: SecureBytes
    private var head = 0, tail = 0
    /// Content read for the password layer, in locked memory.
    private let scratch: SecureBytes?
    private var contentEnded = false
    private let maximumContent: Int?
    /// The content's bytes read so far.
    private(set) var contentLength = 0

    /// `prefix` is the layer's header (§10); `payloadHeader` the payload's type and fields,
    /// sealed with the content when `passwordKey` is given. A content longer than
    /// `maximumContent` is refused as it is read.
    init(content: Content, prefix: [UInt8], payloadHeader: [UInt8], passwordKey: SecureBytes?, maximumContent: Int?) throws {
        self.content = content
        self.maximumContent = maximumContent
        // The secretstream emits at most a header and one sealed chunk for each write.
        waiting = SecureBytes(count: prefix.count + payloadHeader.count + SecretStream.headerLength + 2 * SecretStream.sealedChunkLength)
        scratch = passwordKey.map { _ in SecureBytes(count: SecretStream.chunkLength) }
        inner = nil
        append(prefix)
        if let passwordKey {
            let sealer = try StreamSealer(key: passwordKey) { [unowned self] in append($0) }
            try payloadHeader.withUnsafeBytes { try sealer.write($0) }
            inner = sealer
        } else {
            append(payloadHeader)
        }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        while head == tail {
            guard !contentEnded, buffer.count > 0 else { return 0 }
            guard let inner, let scratch else {
                let count = try content.read(into: buffer)
                try counted(count)
                return count
            }
            // Compact, then let the password layer seal the next content chunk.
            head = 0
            tail = 0
            let count = try scratch.withUnsafeMutableBytes { try content.read(into: $0) }
            try counted(count)
            if count == 0 {
                try inner.finish()
            } else {
                try scratch.withUnsafeBytes { try inner.write(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            }
        }
        let count = min(buffer.count, tail - head)
        waiting.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + head, byteCount: count) }
        head += count
        return count
    }

    private func counted(_ count: Int) throws {
        if count == 0 { contentEnded = true }
        contentLength += count
        if let maximumContent, contentLength > maximumContent {
            throw VaultError.invalidSecret("a key is \(maximumContent) bytes, and this one is longer")
        }
    }

    private func append(_ bytes: [UInt8]) { bytes.withUnsafeBytes { append($0) } }

    private func append(_ bytes: UnsafeRawBufferPointer) {
        precondition(tail + bytes.count <= waiting.count)
        waiting.withUnsafeMutableBytes { ($0.baseAddress! + tail).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
        tail += bytes.count
    }
}
