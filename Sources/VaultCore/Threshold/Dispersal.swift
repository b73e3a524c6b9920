import CVaultGF

/// Rabin's information dispersal over GF(2^8): any k of n pieces rebuild the data, each
/// piece about 1/k of it (Krawczyk, "Secret sharing made short").
///
/// The data is the payload stream's ciphertext, and each of its sealed chunks (65552 bytes,
/// the last one 16 to 65552) is a stripe of its own (FORMAT §8): a stripe of s bytes has
/// rows d_0 … d_{k-1} of L = ceil(s / k) bytes, its k·L − s last bytes zero. Piece j
/// (x = j, 1 … n) gets, per stripe, the segment Σ_i x^i · d_i. Any k rows of this
/// Vandermonde matrix are invertible because the x are distinct and non-zero.
///
/// One stripe per sealed chunk is what lets one core seal, disperse and hash a chunk while
/// it is in that core's cache, and the cores take alternate chunks (``DealLanes``). The data
/// is ciphertext, so this need not be constant-time; the kernel is in CVaultGF.
enum Dispersal {
    /// A stripe's bytes: one sealed chunk of the payload stream.
    static let stripeLength = PayloadStream.sealedChunkLength

    /// The segment of a full stripe, k-of-anything.
    static func segmentLength(k: Int) -> Int { (stripeLength + k - 1) / k }

    /// The largest segment of any k (k ≥ 2; k = 1 only in tests of the dispersal itself).
    static let maximumSegmentLength = stripeLength

    /// The bytes of one piece for `dataLength` bytes of data.
    static func pieceLength(dataLength: UInt64, k: Int) -> UInt64 {
        let layout = segments(dataLength: dataLength, k: k)
        return layout.full * UInt64(segmentLength(k: k)) + UInt64(layout.last)
    }

    /// Segment lengths of a piece, stripe by stripe, for `dataLength` bytes of data: `full`
    /// stripes of ``segmentLength(k:)``, then one of `last` bytes holding `lastData` bytes
    /// of data (none when `last` is 0).
    static func segments(dataLength: UInt64, k: Int) -> (full: UInt64, last: Int, lastData: Int) {
        let rest = Int(dataLength % UInt64(stripeLength))
        return (dataLength / UInt64(stripeLength), (rest + k - 1) / k, rest)
    }

    /// Row x of the encoding matrix: 1, x, x², …, x^(k-1).
    static func row(x: UInt8, k: Int) -> [UInt8] {
        var row = [UInt8](repeating: 1, count: k)
        for i in 1..<max(k, 1) { row[i] = GF256.mul(row[i - 1], x) }
        return row
    }

    /// Encodes one stripe: `stripe` holds its s data bytes followed by room for k·L − s
    /// more, which this zeroes; piece j's segment goes to `segments[j]`. Returns L.
    static func encode(stripe: UnsafeMutableRawPointer, count: Int, matrix: [[UInt8]], into segments: [UnsafeMutableRawPointer]) -> Int {
        let k = matrix[0].count
        let length = (count + k - 1) / k
        (stripe + count).initializeMemory(as: UInt8.self, repeating: 0, count: k * length - count)
        let rows: [UnsafePointer<UInt8>?] = (0..<k).map { UnsafePointer((stripe + $0 * length).assumingMemoryBound(to: UInt8.self)) }
        for (coefficients, segment) in zip(matrix, segments) {
            vault_gf_combine(segment.assumingMemoryBound(to: UInt8.self), rows, coefficients, k, length)
        }
        return length
    }

    /// The encoding matrix's rows for pieces 1 … n.
    static func matrix(k: Int, n: Int) -> [[UInt8]] { (1...n).map { row(x: UInt8($0), k: k) } }

    /// Cuts a stream of data into stripes and emits each stripe's n segments.
    final class Encoder {
        let k: Int, n: Int
        private let matrix: [[UInt8]]
        private let stripe: UnsafeMutableRawPointer
        private var filled = 0
        private let target: () throws -> [UnsafeMutableRawPointer]
        private let emit: (Int) throws -> Void

        /// `emit(segments)` receives each stripe's segments, piece 1's first; they are
        /// valid only during the call.
        convenience init(k: Int, n: Int, emit: @escaping ([UnsafeRawBufferPointer]) throws -> Void) {
            let buffers = (0..<n).map { _ in UnsafeMutableRawPointer.allocate(byteCount: Dispersal.maximumSegmentLength, alignment: 64) }
            self.init(k: k, n: n, into: { buffers }) { length in
                try emit(buffers.map { UnsafeRawBufferPointer(start: $0, count: length) })
            }
            owned = buffers
        }

        /// The buffers of the convenience initializer, released with the encoder.
        private var owned: [UnsafeMutableRawPointer] = []

        /// Encodes each stripe into the n buffers (of ``Dispersal/maximumSegmentLength`` bytes
        /// each) that `target()` gives, then calls `emit(length)` with the segments' length:
        /// the caller owns the buffers, so no segment is copied on its way out.
        init(k: Int, n: Int, into target: @escaping () throws -> [UnsafeMutableRawPointer], emit: @escaping (Int) throws -> Void) {
            precondition(k >= 1 && k <= n && n <= 255)
            self.k = k
            self.n = n
            self.target = target
            self.emit = emit
            matrix = Dispersal.matrix(k: k, n: n)
            // Room for the zero padding of a stripe's last row.
            stripe = .allocate(byteCount: Dispersal.stripeLength + k, alignment: 64)
        }

        deinit {
            owned.forEach { $0.deallocate() }
            stripe.deallocate()
        }

        func write(_ bytes: UnsafeRawBufferPointer) throws {
            var offset = 0
            while offset < bytes.count {
                let take = min(bytes.count - offset, Dispersal.stripeLength - filled)
                (stripe + filled).copyMemory(from: bytes.baseAddress! + offset, byteCount: take)
                filled += take
                offset += take
                if filled == Dispersal.stripeLength { try encodeStripe() }
            }
        }

        /// Encodes the last, shorter stripe, if any.
        func finish() throws {
            if filled > 0 { try encodeStripe() }
        }

        private func encodeStripe() throws {
            let length = Dispersal.encode(stripe: stripe, count: filled, matrix: matrix, into: try target())
            filled = 0
            try emit(length)
        }
    }

    /// Rebuilds stripes from k pieces.
    struct Decoder {
        let k: Int
        private let inverse: [[UInt8]]

        /// A decoder for the pieces with these x (k distinct values in 1 … 255).
        init(xs: [UInt8]) {
            precondition(!xs.isEmpty && Set(xs).count == xs.count && !xs.contains(0))
            k = xs.count
            inverse = Dispersal.invert(xs.map { Dispersal.row(x: $0, k: xs.count) })
        }

        /// One stripe: `segments[j]` is the segment of the piece with x = xs[j], all of
        /// equal length; `output` receives k × that length bytes.
        func decode(_ segments: [UnsafeRawBufferPointer], into output: UnsafeMutableRawBufferPointer) {
            let length = segments[0].count
            precondition(segments.count == k && segments.allSatisfy { $0.count == length } && output.count >= k * length)
            let rows: [UnsafePointer<UInt8>?] = segments.map { $0.baseAddress!.assumingMemoryBound(to: UInt8.self) }
            let target = output.baseAddress!.assumingMemoryBound(to: UInt8.self)
            for i in 0..<k { vault_gf_combine(target + i * length, rows, inverse[i], k, length) }
        }
    }

    /// Gauss-Jordan inversion over GF(2^8). The matrix is public (it depends on the x only).
    static func invert(_ matrix: [[UInt8]]) -> [[UInt8]] {
        let size = matrix.count
        var a = matrix
        var inverse = (0..<size).map { i in (0..<size).map { UInt8($0 == i ? 1 : 0) } }
        for column in 0..<size {
            let pivot = (column..<size).first { a[$0][column] != 0 }!
            a.swapAt(column, pivot)
            inverse.swapAt(column, pivot)
            let scale = GF256.inverse(a[column][column])
            for c in 0..<size {
                a[column][c] = GF256.mul(a[column][c], scale)
                inverse[column][c] = GF256.mul(inverse[column][c], scale)
            }
            for row in 0..<size where row != column && a[row][column] != 0 {
                let factor = a[row][column]
                for c in 0..<size {
                    a[row][c] ^= GF256.mul(factor, a[column][c])
                    inverse[row][c] ^= GF256.mul(factor, inverse[column][c])
                }
            }
        }
        return inverse
    }
}
