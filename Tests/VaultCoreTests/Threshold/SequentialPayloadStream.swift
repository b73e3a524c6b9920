@testable import VaultCore

/// The payload stream (FORMAT §7) sealed one chunk after another, for tests that need a
/// whole ciphertext stream. vault itself seals chunks only inside ``DealLanes``, on their
/// way to pieces, with the same ``PayloadStream/seal(_:index:last:with:into:)``.
final class PayloadSealer {
    private let cipher: AESGCMChunkCipher
    private let pending = ChunkAccumulator(capacity: PayloadStream.chunkLength)
    private var index: UInt64 = 0
    private let emit: (UnsafeRawBufferPointer) throws -> Void

    init(key: SecureBytes, emit: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        cipher = key.withUnsafeBytes { AESGCMChunkCipher(key: $0, sealing: true) }
        self.emit = emit
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        try pending.append(bytes) { try seal($0, last: false) }
    }

    func finish() throws {
        try pending.drain { try seal($0, last: true) }
    }

    private func seal(_ chunk: UnsafeRawBufferPointer, last: Bool) throws {
        var sealed = [UInt8](repeating: 0, count: chunk.count + PayloadStream.tagLength)
        sealed.withUnsafeMutableBytes { PayloadStream.seal(chunk, index: index, last: last, with: cipher, into: $0) }
        index += 1
        try sealed.withUnsafeBytes { try emit($0) }
    }
}

/// The payload stream opened one chunk after another, with vault's own
/// ``PayloadStream/open(_:index:last:with:into:)`` (which ``RecoveryLanes`` uses).
final class PayloadOpener {
    private let cipher: AESGCMChunkCipher
    private let pending = ChunkAccumulator(capacity: PayloadStream.sealedChunkLength)
    private var index: UInt64 = 0
    private let emit: (UnsafeRawBufferPointer) throws -> Void

    init(key: SecureBytes, emit: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        cipher = key.withUnsafeBytes { AESGCMChunkCipher(key: $0, sealing: false) }
        self.emit = emit
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        try pending.append(bytes) { try open($0, last: false) }
    }

    /// Ends the stream: what remains is the final chunk.
    func finish() throws {
        guard pending.count >= PayloadStream.tagLength else { throw SecretStream.Failure.truncated }
        try pending.drain { try open($0, last: true) }
    }

    private func open(_ chunk: UnsafeRawBufferPointer, last: Bool) throws {
        var plain = [UInt8](repeating: 0, count: chunk.count - PayloadStream.tagLength)
        try plain.withUnsafeMutableBytes { try PayloadStream.open(chunk, index: index, last: last, with: cipher, into: $0) }
        index += 1
        try plain.withUnsafeBytes { try emit($0) }
    }
}
