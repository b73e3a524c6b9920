import Foundation

/// Recovery's pipeline from k pieces to plaintext (FORMAT §7–§9), a stripe at a time on
/// every core, as ``DealLanes`` deals: each lane reads the next stripe's k segments at their
/// places in the pieces, hashes them (when the pieces are checked in the same pass),
/// decodes the sealed chunk and opens it, all while it is in that core's cache. Only
/// adding the digests to the commitments and handing the plaintext on keep stripe order.
///
/// A stripe that fails (a piece cut short, padding that is not zero, a chunk that does not
/// open) stops every lane, and the output has received exactly the plaintext of the
/// stripes before it: failures, like plaintext, are taken in stripe order.
final class RecoveryLanes: @unchecked Sendable {
    /// A piece: its x, its file, and where in the file it starts.
    struct Piece {
        let x: UInt8
        let file: FileSource
        let offset: UInt64
    }

    private let k: Int
    private let pieces: [Piece]
    private let key: SecureBytes
    private let decoder: Dispersal.Decoder
    private let hashers: [PieceHasher]?
    private let progress: ProgressMeter?
    private let emit: (UnsafeRawBufferPointer) throws -> Void
    private let layout: (full: UInt64, last: Int, lastData: Int)
    private let stripes: UInt64
    private let segmentLength: Int

    /// Guards the next stripe to take. Not taken in turn: a lane emitting in turn (a write,
    /// the password layer) must not keep the others from taking stripes.
    private let taking = NSLock()
    private var nextStripe: UInt64 = 0
    /// The stripes' order, and the first failure.
    private let order = LaneOrder()
    /// How far the pieces were asked to be read ahead, in turn.
    private var prefetched: UInt64 = 0

    /// Lanes that rebuild `ciphertextLength` bytes of ciphertext from `pieces` (k of a k-of-n
    /// secret), open it under `key` and hand the plaintext to `emit`, in order. With
    /// `hashers` (one a piece), each piece's segments are hashed on the way.
    init(ciphertextLength: UInt64, pieces: [Piece], key: SecureBytes, hashers: [PieceHasher]?, progress: ProgressMeter?,
         emit: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        precondition(key.count == 32 && !pieces.isEmpty && (hashers?.count ?? pieces.count) == pieces.count)
        k = pieces.count
        self.pieces = pieces
        self.key = key
        self.hashers = hashers
        self.progress = progress
        self.emit = emit
        decoder = Dispersal.Decoder(xs: pieces.map(\.x))
        layout = Dispersal.segments(dataLength: ciphertextLength, k: k)
        stripes = layout.full + (layout.last > 0 ? 1 : 0)
        segmentLength = Dispersal.segmentLength(k: k)
    }

    /// Rebuilds and opens every stripe. `beforeLast` runs once the hashers have seen every
    /// segment and before the last stripe's plaintext goes on: a failed check there keeps
    /// the end of the plaintext back, and all of a secret of one stripe (64 KiB). Throws
    /// ``SecretRecovery/PiecesDisagree`` for what the pieces' bytes cause, and other errors
    /// (the output's, `beforeLast`'s) as they are.
    func run(beforeLast: @escaping () throws -> Void = {}) throws {
        self.beforeLast = beforeLast
        PayloadStream.inLanes { _ in
            let lane = Lane(key: key, k: k, segmentLength: segmentLength)
            while let stripe = take() {
                let outcome = Result { try rebuild(stripe, in: lane) }
                guard order.inTurn(stripe, { try commit(stripe, outcome, from: lane) }) else { break }
            }
        }
        if let failure = order.failure { throw failure }
    }

    private var beforeLast: () throws -> Void = {}

    /// One lane's buffers and contexts, used by its thread alone.
    private final class Lane {
        let segments: [UnsafeMutableRawPointer]
        /// The decoded stripe: a sealed chunk and its padding.
        let stripe: UnsafeMutableRawPointer
        /// The opened chunk, in locked memory.
        let plain = SecureBytes(count: PayloadStream.chunkLength)
        let cipher: AESGCMChunkCipher
        let hasher = SHA256Hasher()
        var digests: [UInt8]
        var plainLength = 0

        init(key: SecureBytes, k: Int, segmentLength: Int) {
            segments = (0..<k).map { _ in .allocate(byteCount: segmentLength, alignment: 64) }
            stripe = .allocate(byteCount: k * segmentLength, alignment: 64)
            cipher = key.withUnsafeBytes { AESGCMChunkCipher(key: $0, sealing: false) }
            digests = [UInt8](repeating: 0, count: 32 * k)
        }

        deinit {
            segments.forEach { $0.deallocate() }
            stripe.deallocate()
        }
    }

    /// The next stripe to rebuild; nil once all are taken or one failed.
    private func take() -> UInt64? {
        taking.lock()
        defer { taking.unlock() }
        guard order.failure == nil, nextStripe < stripes else { return nil }
        nextStripe += 1
        return nextStripe - 1
    }

    /// Reads, hashes, decodes and opens one stripe into the lane.
    private func rebuild(_ stripe: UInt64, in lane: Lane) throws {
        let isLast = stripe == stripes - 1
        let segment = isLast && layout.last > 0 ? layout.last : segmentLength
        let data = isLast && layout.last > 0 ? layout.lastData : Dispersal.stripeLength
        let position = stripe * UInt64(segmentLength)
        do {
            for (j, piece) in pieces.enumerated() {
                try piece.file.read(at: piece.offset + position, into: UnsafeMutableRawBufferPointer(start: lane.segments[j], count: segment),
                                    what: "a piece")
            }
        } catch let error as VaultError {
            throw SecretRecovery.PiecesDisagree(error: error)
        }
        let segments = lane.segments.map { UnsafeRawBufferPointer(start: $0, count: segment) }
        if hashers != nil {
            lane.digests.withUnsafeMutableBytes { digests in
                for (j, bytes) in segments.enumerated() {
                    lane.hasher.update(bytes)
                    lane.hasher.finish(into: digests.baseAddress! + 32 * j)
                }
            }
        }
        let decoded = UnsafeMutableRawBufferPointer(start: lane.stripe, count: k * segment)
        decoder.decode(segments, into: decoded)
        // The dealer zero-pads each stripe (FORMAT.md §8); other padding is a second
        // encoding of the same ciphertext, so it is refused.
        guard UnsafeRawBufferPointer(decoded)[data...].allSatisfy({ $0 == 0 }) else {
            throw SecretRecovery.PiecesDisagree(error: .corruptSecret("a stripe's padding is not zero"))
        }
        lane.plainLength = data - PayloadStream.tagLength
        let failure = lane.plain.withUnsafeMutableBytes { plain -> SecretStream.Failure? in
            do throws(SecretStream.Failure) {
                try PayloadStream.open(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(decoded)[0..<data]), index: stripe, last: isLast,
                                       with: lane.cipher, into: UnsafeMutableRawBufferPointer(rebasing: plain[0..<lane.plainLength]))
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw SecretRecovery.PiecesDisagree(error: SecretRecovery.ciphertextError(failure)) }
    }

    /// Takes the stripe's outcome, in turn: its digests and plaintext go on, or its failure
    /// stops the lanes.
    private func commit(_ stripe: UInt64, _ outcome: Result<Void, Error>, from lane: Lane) throws {
        try outcome.get()
        if let hashers {
            lane.digests.withUnsafeBytes { digests in
                for (j, hasher) in hashers.enumerated() {
                    hasher.append(segmentDigest: UnsafeRawBufferPointer(rebasing: digests[32 * j..<32 * j + 32]))
                }
            }
        }
        prefetch(from: stripe * UInt64(segmentLength))
        if stripe == stripes - 1 { try beforeLast() }
        progress?.advance(lane.plainLength + PayloadStream.tagLength)
        try lane.plain.withUnsafeBytes { try emit(UnsafeRawBufferPointer(rebasing: $0[0..<lane.plainLength])) }
    }

    /// Read-ahead: asks for the next 16 MiB of every piece while 8 MiB remain of the last
    /// stretch. The lanes read their stripes' segments a few KiB at a time from k files,
    /// which the kernel's own read-ahead serves poorly on a disk (FileSource says more).
    private func prefetch(from position: UInt64) {
        guard position + FileSource.readAhead / 2 >= prefetched else { return }
        for piece in pieces { piece.file.prefetch(FileSource.readAhead, at: piece.offset + prefetched) }
        prefetched += FileSource.readAhead
    }
}
