import CSodium

/// `crypto_secretstream_xchacha20poly1305` framed as every vault stream is: a 24-byte
/// header, then chunks of exactly 65536 plaintext bytes except the last, which holds 0 to
/// 65536 bytes and alone carries the FINAL tag. Each chunk grows by 17 bytes.
///
/// The FINAL tag makes truncation at a chunk boundary detectable; the fixed chunk size
/// makes every length derivable from the plaintext length, so headers can state it.
enum SecretStream {
    static let chunkLength = 65536
    static let overhead = Int(crypto_secretstream_xchacha20poly1305_ABYTES)
    static let headerLength = Int(crypto_secretstream_xchacha20poly1305_HEADERBYTES)
    static let sealedChunkLength = chunkLength + overhead

    /// The sealed length of `plaintext` bytes, header included.
    static func sealedLength(plaintext: UInt64) -> UInt64 {
        let chunks = max(1, (plaintext + UInt64(chunkLength) - 1) / UInt64(chunkLength))
        return UInt64(headerLength) + plaintext + chunks * UInt64(overhead)
    }

    /// The plaintext length of a stream of `sealed` bytes, or nil if no stream has it.
    static func plaintextLength(sealed: UInt64) -> UInt64? {
        guard sealed >= UInt64(headerLength + overhead) else { return nil }
        let body = sealed - UInt64(headerLength)
        let fullChunks = body / UInt64(sealedChunkLength)
        let rest = body % UInt64(sealedChunkLength)
        if rest == 0 { return fullChunks * UInt64(chunkLength) }
        guard rest >= UInt64(overhead) else { return nil }
        return fullChunks * UInt64(chunkLength) + rest - UInt64(overhead)
    }

    /// Why a stream failed to open.
    enum Failure: UserFacingError, Equatable {
        /// A chunk did not authenticate: a wrong key, or altered data.
        case forged
        /// The stream ended before its FINAL chunk.
        case truncated
        /// Data followed the FINAL chunk.
        case trailingData
        /// A chunk carried PUSH or REKEY, which vault never writes.
        case unexpectedTag

        /// In words, to follow "the stream" or a name for it.
        var description: String {
            switch self {
            case .forged: "does not authenticate (a wrong key, or altered data)"
            case .truncated: "ends before its final chunk"
            case .trailingData: "has data after its final chunk"
            case .unexpectedTag: "has a chunk tagged other than message or final"
            }
        }
    }
}

/// Seals a stream written in pieces of any size.
final class StreamSealer {
    private var state = crypto_secretstream_xchacha20poly1305_state()
    private let pending = ChunkAccumulator(capacity: SecretStream.chunkLength)
    private var sealed: [UInt8]
    private let emit: (UnsafeRawBufferPointer) throws -> Void
    private var finished = false

    /// Starts a stream under `key` (32 bytes); the header is emitted at once.
    init(key: SecureBytes, emit: @escaping (UnsafeRawBufferPointer) throws -> Void) throws {
        Sodium.ready
        precondition(key.count == Int(crypto_secretstream_xchacha20poly1305_KEYBYTES))
        self.emit = emit
        sealed = [UInt8](repeating: 0, count: SecretStream.sealedChunkLength)
        var header = [UInt8](repeating: 0, count: SecretStream.headerLength)
        key.withUnsafeBytes { k in
            _ = crypto_secretstream_xchacha20poly1305_init_push(&state, &header, k.bindMemory(to: UInt8.self).baseAddress!)
        }
        try header.withUnsafeBytes { try emit($0) }
    }

    deinit {
        sodium_memzero(&state, MemoryLayout.size(ofValue: state))
    }

    /// Adds plaintext.
    func write(_ bytes: UnsafeRawBufferPointer) throws {
        precondition(!finished)
        try pending.append(bytes) { try seal($0, final: false) }
    }

    /// Seals what remains as the FINAL chunk.
    func finish() throws {
        precondition(!finished)
        try pending.drain { try seal($0, final: true) }
        finished = true
    }

    private func seal(_ plain: UnsafeRawBufferPointer, final: Bool) throws {
        let tag = UInt8(final ? crypto_secretstream_xchacha20poly1305_TAG_FINAL : crypto_secretstream_xchacha20poly1305_TAG_MESSAGE)
        var length: UInt64 = 0
        _ = crypto_secretstream_xchacha20poly1305_push(&state, &sealed, &length, plain.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                                       UInt64(plain.count), nil, 0, tag)
        try sealed.withUnsafeBytes { try emit(UnsafeRawBufferPointer(rebasing: $0[0..<Int(length)])) }
    }
}

/// Opens a stream fed in pieces of any size, emitting only authenticated plaintext.
final class StreamOpener {
    private var state = crypto_secretstream_xchacha20poly1305_state()
    private let key: SecureBytes
    private var header: [UInt8] = []
    private var started = false
    private let pending = ChunkAccumulator(capacity: SecretStream.sealedChunkLength)
    private var plain: [UInt8]
    private var sawFinal = false
    private let emit: (UnsafeRawBufferPointer) throws -> Void

    init(key: SecureBytes, emit: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        Sodium.ready
        self.key = key
        self.emit = emit
        plain = [UInt8](repeating: 0, count: SecretStream.chunkLength)
    }

    deinit {
        sodium_memzero(&state, MemoryLayout.size(ofValue: state))
        plain.withUnsafeMutableBytes { sodium_memzero($0.baseAddress!, $0.count) }
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < bytes.count {
            if !started {
                let take = min(bytes.count - offset, SecretStream.headerLength - header.count)
                header += bytes[offset..<offset + take]
                offset += take
                if header.count == SecretStream.headerLength {
                    let status = key.withUnsafeBytes { k in
                        crypto_secretstream_xchacha20poly1305_init_pull(&state, header, k.bindMemory(to: UInt8.self).baseAddress!)
                    }
                    guard status == 0 else { throw SecretStream.Failure.forged }
                    started = true
                }
                continue
            }
            try pending.append(UnsafeRawBufferPointer(rebasing: bytes[offset...])) { try open($0, last: false) }
            return
        }
    }

    /// Ends the stream: the remaining bytes must be the FINAL chunk.
    func finish() throws {
        guard started, pending.count >= SecretStream.overhead else { throw SecretStream.Failure.truncated }
        try pending.drain { try open($0, last: true) }
    }

    private func open(_ sealedChunk: UnsafeRawBufferPointer, last: Bool) throws {
        guard !sawFinal else { throw SecretStream.Failure.trailingData }
        var length: UInt64 = 0
        var tag: UInt8 = 0
        let status = crypto_secretstream_xchacha20poly1305_pull(&state, &plain, &length, &tag,
                                                                sealedChunk.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                                                UInt64(sealedChunk.count), nil, 0)
        guard status == 0 else { throw SecretStream.Failure.forged }
        let isFinal = tag == UInt8(crypto_secretstream_xchacha20poly1305_TAG_FINAL)
        // PUSH and REKEY are never written; REKEY would even change the keys mid-stream. One
        // encoding per stream: MESSAGE before the last chunk, FINAL on it.
        guard isFinal || tag == UInt8(crypto_secretstream_xchacha20poly1305_TAG_MESSAGE) else {
            throw SecretStream.Failure.unexpectedTag
        }
        if isFinal && !last { throw SecretStream.Failure.trailingData }
        if !isFinal && last { throw SecretStream.Failure.truncated }
        // A chunk before the last must be full: the framing allows one encoding only.
        if !last && length != UInt64(SecretStream.chunkLength) { throw SecretStream.Failure.forged }
        sawFinal = isFinal
        try plain.withUnsafeBytes { try emit(UnsafeRawBufferPointer(rebasing: $0[0..<Int(length)])) }
    }
}
