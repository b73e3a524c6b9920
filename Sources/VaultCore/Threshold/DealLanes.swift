import Foundation

/// The dealer's pipeline from plaintext to pieces (FORMAT §7–§9), a chunk at a time on
/// every core. Each lane (the caller's thread, and one helper a further core) takes the next
/// 64 KiB of plaintext, seals it as one chunk of the payload stream, disperses that sealed
/// chunk (one stripe) into its n segments, hashes each segment and writes it at its place in
/// its piece: all of it while the chunk is in that core's cache. Each lane takes the next
/// chunk when it is free, so the lanes move no data between cores.
///
/// Only two steps keep chunk order: reading the plaintext (a stream), and adding each
/// segment's digest to its piece's commitment (§9), 32 bytes a segment. Measured on 2
/// cores, this doubled the rate of the earlier pipeline, which sealed on both cores,
/// dispersed on one and hashed each piece on another, and so carried every byte from core
/// to core (Docs/DECISIONS.md, "Format v2").
final class DealLanes: @unchecked Sendable {
    private let k: Int, n: Int
    private let key: SecureBytes
    private let matrix: [[UInt8]]
    private let outputs: [OutputFile]
    /// Where each piece starts in its output.
    private let offset: UInt64
    private let segmentLength: Int
    private let commitments: [PieceHasher]

    /// Guards the plaintext source, the chunk count and the byte carried to the next chunk.
    private let reading = NSLock()
    private var nextChunk: UInt64 = 0
    private var carried: UInt8?
    private var ended = false
    /// Guards the chunks' order (`turn`), the length made, and the first failure.
    private let order = NSCondition()
    private var turn: UInt64 = 0
    private var ciphertextLength: UInt64 = 0
    private var failure: Error?

    /// Lanes that seal under `key` (32 bytes), disperse k of n and write piece j at
    /// `offset` in `outputs[j]`.
    init(key: SecureBytes, k: Int, n: Int, outputs: [OutputFile], offset: UInt64) {
        precondition(key.count == 32 && outputs.count == n)
        self.k = k
        self.n = n
        self.key = key
        self.outputs = outputs
        self.offset = offset
        matrix = Dispersal.matrix(k: k, n: n)
        segmentLength = Dispersal.segmentLength(k: k)
        commitments = (0..<n).map { _ in PieceHasher(threshold: k) }
    }

    /// Deals the whole of `plaintext`; returns the ciphertext's length and each piece's
    /// commitment. Throws the first failure (the source's, an output's, a limit), after
    /// every lane has stopped.
    func run(_ plaintext: some ByteSource) throws -> (ciphertextLength: UInt64, commitments: [[UInt8]]) {
        // Read only under `reading`, by one lane at a time.
        nonisolated(unsafe) var source = plaintext
        PayloadStream.inLanes { _ in
            let lane = Lane(key: key, k: k, n: n, segmentLength: segmentLength)
            while let chunk = take(from: &source, into: lane) {
                do {
                    try deal(chunk, in: lane)
                } catch {
                    fail(error)
                    break
                }
                guard commit(chunk, from: lane) else { break }
            }
        }
        if let failure { throw failure }
        return (ciphertextLength, commitments.map { $0.finish() })
    }

    /// One lane's buffers and contexts, used by its thread alone.
    private final class Lane {
        /// Plaintext: a chunk and one byte more, which tells whether the chunk is the last.
        let plain = SecureBytes(count: PayloadStream.chunkLength + 1)
        /// The sealed chunk, with room for its stripe's padding.
        let sealed: UnsafeMutableRawPointer
        let segments: [UnsafeMutableRawPointer]
        let cipher: AESGCMChunkCipher
        let hasher = SHA256Hasher()
        var digests: [UInt8]
        var count = 0, last = false, segment = 0

        init(key: SecureBytes, k: Int, n: Int, segmentLength: Int) {
            sealed = .allocate(byteCount: Dispersal.stripeLength + k, alignment: 64)
            segments = (0..<n).map { _ in .allocate(byteCount: segmentLength, alignment: 64) }
            cipher = key.withUnsafeBytes { AESGCMChunkCipher(key: $0, sealing: true) }
            digests = [UInt8](repeating: 0, count: 32 * n)
        }

        deinit {
            sealed.deallocate()
            segments.forEach { $0.deallocate() }
        }
    }

    /// Reads the next chunk's plaintext into the lane, in order; nil at the end or after a
    /// failure. A chunk is the last when the source has no byte after it: the lane reads one
    /// byte more, and a full chunk hands that byte on to the next.
    private func take(from source: inout some ByteSource, into lane: Lane) -> UInt64? {
        reading.lock()
        defer { reading.unlock() }
        guard !ended, order.withLock({ failure == nil }) else { return nil }
        let chunk = nextChunk
        do {
            var count = 0
            if let carried {
                lane.plain.withUnsafeMutableBytes { $0[0] = carried }
                count = 1
                self.carried = nil
            }
            try lane.plain.withUnsafeMutableBytes { buffer in
                while count < buffer.count {
                    let got = try source.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[count...]))
                    if got == 0 { break }
                    count += got
                }
            }
            lane.last = count <= PayloadStream.chunkLength
            if lane.last {
                ended = true
            } else {
                carried = lane.plain.withUnsafeBytes { $0[PayloadStream.chunkLength] }
                count = PayloadStream.chunkLength
            }
            lane.count = count
        } catch {
            ended = true
            fail(error)
            return nil
        }
        nextChunk += 1
        return chunk
    }

    /// Seals, disperses, hashes and writes one chunk.
    private func deal(_ chunk: UInt64, in lane: Lane) throws {
        let sealedLength = lane.count + PayloadStream.tagLength
        guard chunk * UInt64(PayloadStream.sealedChunkLength) + UInt64(sealedLength) <= Limits.maximumCiphertext else {
            throw VaultError.invalidSecret("larger than 1 TiB")
        }
        lane.plain.withUnsafeBytes { plain in
            PayloadStream.seal(UnsafeRawBufferPointer(rebasing: plain[0..<lane.count]), index: chunk, last: lane.last, with: lane.cipher,
                               into: UnsafeMutableRawBufferPointer(start: lane.sealed, count: sealedLength))
        }
        lane.segment = Dispersal.encode(stripe: lane.sealed, count: sealedLength, matrix: matrix, into: lane.segments)
        let position = offset + chunk * UInt64(segmentLength)
        for j in 0..<n {
            let segment = UnsafeRawBufferPointer(start: lane.segments[j], count: lane.segment)
            lane.hasher.update(segment)
            lane.digests.withUnsafeMutableBytes { lane.hasher.finish(into: $0.baseAddress! + 32 * j) }
            try outputs[j].write(segment, at: position)
        }
    }

    /// Adds the chunk's segment digests to the commitments once every earlier chunk's are
    /// in; false if another lane failed meanwhile.
    private func commit(_ chunk: UInt64, from lane: Lane) -> Bool {
        order.lock()
        defer { order.unlock() }
        while turn != chunk && failure == nil { order.wait() }
        guard failure == nil else { return false }
        lane.digests.withUnsafeBytes { digests in
            for j in 0..<n { commitments[j].append(segmentDigest: UnsafeRawBufferPointer(rebasing: digests[32 * j..<32 * j + 32])) }
        }
        let end = offset + chunk * UInt64(segmentLength) + UInt64(lane.segment)
        for output in outputs { output.wrote(through: end) }
        ciphertextLength += UInt64(lane.count + PayloadStream.tagLength)
        turn += 1
        order.broadcast()
        return true
    }

    private func fail(_ error: Error) {
        order.lock()
        if failure == nil { failure = error }
        order.broadcast()
        order.unlock()
    }
}
