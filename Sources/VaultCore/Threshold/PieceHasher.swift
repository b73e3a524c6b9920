/// The commitment to a piece (FORMAT §9): SHA-256 of "vault/v2/piece" followed by the
/// SHA-256 of each of the piece's segments, one a stripe (§8), in order.
///
/// Each segment is hashed on its own so that the core which encodes a stripe hashes its
/// segments too, while they are in its cache, and the cores take alternate stripes
/// (``DealLanes``); the list hash then costs 32 bytes a segment, in stripe order. It stays a
/// collision-resistant commitment to the whole piece: the header's ciphertext length fixes
/// the segments' count and lengths, so two pieces with one commitment would need a SHA-256
/// collision in the list or in a segment.
final class PieceHasher {
    private let list = SHA256Hasher(domain: "vault/v2/piece")
    private let segment = SHA256Hasher()
    private let segmentLength: Int
    /// Bytes of the current segment hashed so far.
    private var filled = 0
    private var digest = [UInt8](repeating: 0, count: 32)

    /// A hasher for a piece of a k-of-n secret (its full segments are ⌈65552 / k⌉ bytes).
    init(threshold k: Int) { segmentLength = Dispersal.segmentLength(k: k) }

    /// Hashes the piece's next bytes, cut into segments here.
    func update(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count {
            let take = min(bytes.count - offset, segmentLength - filled)
            segment.update(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + take]))
            filled += take
            offset += take
            if filled == segmentLength { endSegment() }
        }
    }

    /// Adds the next segment by its SHA-256 (32 bytes), hashed elsewhere.
    func append(segmentDigest: UnsafeRawBufferPointer) {
        precondition(filled == 0 && segmentDigest.count == 32)
        list.update(segmentDigest)
    }

    /// The commitment.
    func finish() -> [UInt8] {
        if filled > 0 { endSegment() }
        return list.finish()
    }

    private func endSegment() {
        digest.withUnsafeMutableBytes { segment.finish(into: $0.baseAddress!) }
        digest.withUnsafeBytes { list.update($0) }
        filled = 0
    }
}
