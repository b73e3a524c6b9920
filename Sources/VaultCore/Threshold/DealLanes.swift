import Foundation

/// The dealer's pipeline from plaintext to pieces (FORMAT §7–§9), a few chunks at a time
/// on every core. Each lane (the caller's thread, and one helper a further core) takes the
/// next run of 64 KiB chunks of plaintext, seals each as one chunk of the payload stream,
/// disperses that sealed chunk (one stripe) into its n segments and hashes each segment,
/// all while the chunk is in that core's cache, then writes each piece's segments of the
/// run at their place. Each lane takes the next run when it is free, so the lanes move no
/// data between cores.
///
/// Only two steps keep chunk order: reading the plaintext (a stream), and adding each
/// segment's digest to its piece's commitment (§9), 32 bytes a segment. Measured on 2
/// cores, sharing 1 GiB on tmpfs took 1.5–1.7 s against 2.6 s for the earlier pipeline,
/// which sealed on both cores, dispersed on one and hashed each piece on another, and so
/// carried every byte from core to core (Docs/DECISIONS.md, "Format v2").
final class DealLanes: @unchecked Sendable {
    private let k: Int, n: Int
    private let key: SecureBytes
    private let coding: Dispersal.Coding
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
    /// The digests' order, and the first failure.
    private let order = LaneOrder()
    /// The ciphertext's length so far, counted in turn.
    private var ciphertextLength: UInt64 = 0

    /// Lanes that seal under `key` (32 bytes), disperse k of n and write piece j at
    /// `offset` in `outputs[j]`.
    init(key: SecureBytes, k: Int, n: Int, outputs: [OutputFile], offset: UInt64) {
        precondition(key.count == 32 && outputs.count == n)
        self.k = k
        self.n = n
        self.key = key
        self.outputs = outputs
        self.offset = offset
        coding = Dispersal.Coding(matrix: Dispersal.matrix(k: k, n: n))
        segmentLength = Dispersal.segmentLength(k: k)
        run = max(1, min(4, (1 << 20) / (n * segmentLength)))
        commitments = (0..<n).map { _ in PieceHasher(threshold: k) }
    }

    /// Deals the whole of `plaintext`; returns the ciphertext's length and each piece's
    /// commitment. Throws the first failure (the source's, an output's, a limit), after
    /// every lane has stopped.
    func run(_ plaintext: some ByteSource) throws -> (ciphertextLength: UInt64, commitments: [[UInt8]]) {
        // Read only under `reading`, by one lane at a time.
        nonisolated(unsafe) var source = plaintext
        PayloadStream.inLanes { _ in
            let lane = Lane(key: key, k: k, n: n, segmentLength: segmentLength, run: run)
            while let first = take(from: &source, into: lane) {
                do {
                    try deal(from: first, in: lane)
                } catch {
                    order.fail(error)
                    break
                }
                guard order.inTurn(first, count: UInt64(lane.chunks), { commit(from: first, in: lane) }) else { break }
            }
        }
        if let failure = order.failure { throw failure }
        return (ciphertextLength, commitments.map { $0.finish() })
    }

    /// Chunks a lane takes at a time: one read of the plaintext and one write of each
    /// piece's segments serve them all. Four took a tenth of a second of system time off
    /// sharing 1 GiB on tmpfs (1.51–1.53 s against 1.57–1.61 s); eight did no better.
    /// Fewer when the pieces are many, so that a lane's segments stay within 1 MiB (or
    /// one chunk's, for up to 255 pieces).
    private let run: Int

    /// One lane's buffers and contexts, used by its thread alone.
    private final class Lane {
        /// Plaintext: a run of chunks and one byte more, which tells whether the run's last
        /// chunk is the stream's.
        let plain: SecureBytes
        /// A sealed chunk, with room for its stripe's padding.
        let sealed: UnsafeMutableRawPointer
        /// Each piece's segments of the run, one after the other.
        let segments: [UnsafeMutableRawPointer]
        let cipher: AESGCMChunkCipher
        let hasher = SHA256Hasher()
        /// The segments' SHA-256, chunk by chunk, piece by piece.
        var digests: [UInt8]
        /// The plaintext bytes taken, whether they end the stream, and the bytes of each
        /// piece's segments made of them.
        var count = 0, last = false, written = 0

        init(key: SecureBytes, k: Int, n: Int, segmentLength: Int, run: Int) {
            plain = SecureBytes(count: run * PayloadStream.chunkLength + 1)
            sealed = .allocate(byteCount: Dispersal.stripeLength + k, alignment: 64)
            segments = (0..<n).map { _ in .allocate(byteCount: run * segmentLength, alignment: 64) }
            cipher = key.withUnsafeBytes { AESGCMChunkCipher(key: $0, sealing: true) }
            digests = [UInt8](repeating: 0, count: 32 * n * run)
        }

        deinit {
            sealed.deallocate()
            segments.forEach { $0.deallocate() }
        }

        /// The chunks taken: the last may be short, and an empty stream is one empty chunk.
        var chunks: Int { max(1, (count + PayloadStream.chunkLength - 1) / PayloadStream.chunkLength) }
    }

    /// Reads the next run of chunks' plaintext into the lane, in order; returns the first
    /// chunk's index, nil at the end or after a failure. The stream ends with the run when
    /// the source has no byte after it: the lane reads one byte more, and a full run hands
    /// that byte on to the next.
    private func take(from source: inout some ByteSource, into lane: Lane) -> UInt64? {
        reading.lock()
        defer { reading.unlock() }
        guard !ended, order.failure == nil else { return nil }
        let first = nextChunk
        let full = run * PayloadStream.chunkLength
        do {
            var count = 0
            if let carried {
                lane.plain.withUnsafeMutableBytes { $0[0] = carried }
                count = 1
                self.carried = nil
            }
            count += try lane.plain.withUnsafeMutableBytes { try source.fill(UnsafeMutableRawBufferPointer(rebasing: $0[count...])) }
            lane.last = count <= full
            if lane.last {
                ended = true
            } else {
                carried = lane.plain.withUnsafeBytes { $0[full] }
                count = full
            }
            lane.count = count
        } catch {
            ended = true
            order.fail(error)
            return nil
        }
        nextChunk += UInt64(lane.chunks)
        return first
    }

    /// Seals, disperses and hashes each chunk of the run, then writes each piece's
    /// segments of it at once.
    private func deal(from first: UInt64, in lane: Lane) throws {
        lane.written = 0
        for i in 0..<lane.chunks {
            let chunk = first + UInt64(i)
            let plainLength = min(PayloadStream.chunkLength, lane.count - i * PayloadStream.chunkLength)
            let sealedLength = plainLength + PayloadStream.tagLength
            guard chunk * UInt64(PayloadStream.sealedChunkLength) + UInt64(sealedLength) <= Limits.maximumCiphertext else {
                throw VaultError.invalidSecret("larger than 1 TiB")
            }
            lane.plain.withUnsafeBytes { plain in
                let start = i * PayloadStream.chunkLength
                PayloadStream.seal(UnsafeRawBufferPointer(rebasing: plain[start..<start + plainLength]), index: chunk,
                                   last: lane.last && i == lane.chunks - 1, with: lane.cipher,
                                   into: UnsafeMutableRawBufferPointer(start: lane.sealed, count: sealedLength))
            }
            let targets = lane.segments.map { $0 + lane.written }
            let segment = Dispersal.encode(stripe: lane.sealed, count: sealedLength, coding: coding, into: targets)
            lane.digests.withUnsafeMutableBytes { digests in
                for (j, target) in targets.enumerated() {
                    lane.hasher.update(UnsafeRawBufferPointer(start: target, count: segment))
                    lane.hasher.finish(into: digests.baseAddress! + 32 * (i * n + j))
                }
            }
            lane.written += segment
        }
        let position = offset + first * UInt64(segmentLength)
        for (j, segments) in lane.segments.enumerated() {
            try outputs[j].write(UnsafeRawBufferPointer(start: segments, count: lane.written), at: position)
        }
    }

    /// Adds the run's segment digests to the commitments, in turn.
    private func commit(from first: UInt64, in lane: Lane) {
        lane.digests.withUnsafeBytes { digests in
            for i in 0..<lane.chunks {
                for j in 0..<n {
                    let at = 32 * (i * n + j)
                    commitments[j].append(segmentDigest: UnsafeRawBufferPointer(rebasing: digests[at..<at + 32]))
                }
            }
        }
        let end = offset + first * UInt64(segmentLength) + UInt64(lane.written)
        for output in outputs { output.wrote(through: end) }
        ciphertextLength += UInt64(lane.count + lane.chunks * PayloadStream.tagLength)
    }
}
