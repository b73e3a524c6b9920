import CVaultGF

/// Rabin's information dispersal over GF(2^8): any k of n pieces rebuild the data, each
/// piece about 1/k of it (Krawczyk, "Secret sharing made short").
///
/// The data is cut into stripes of k·L bytes, L = 65536; the last stripe holds the
/// remaining r bytes with L' = ceil(r / k), zero-padded to k·L'. A stripe's rows are its k
/// consecutive L-byte (or L'-byte) slices d_0 … d_{k-1}. Piece j (x = j, 1 … n) gets, per
/// stripe, Σ_i x^i · d_i. Any k rows of this Vandermonde matrix are invertible because the
/// x are distinct and non-zero. The data is ciphertext, so this need not be constant-time;
/// the kernel is in CVaultGF.
enum Dispersal {
    static let segmentLength = 65536

    /// The bytes of one piece for `dataLength` bytes of data.
    static func pieceLength(dataLength: UInt64, k: Int) -> UInt64 {
        let stripe = UInt64(k * segmentLength)
        let rest = dataLength % stripe
        return dataLength / stripe * UInt64(segmentLength) + (rest + UInt64(k) - 1) / UInt64(k)
    }

    /// Segment lengths of a piece, stripe by stripe, for `dataLength` bytes of data.
    static func segments(dataLength: UInt64, k: Int) -> (full: UInt64, last: Int, lastData: Int) {
        let stripe = UInt64(k * segmentLength)
        let rest = Int(dataLength % stripe)
        return (dataLength / stripe, (rest + k - 1) / k, rest)
    }

    /// Row x of the encoding matrix: 1, x, x², …, x^(k-1).
    static func row(x: UInt8, k: Int) -> [UInt8] {
        var row = [UInt8](repeating: 1, count: k)
        for i in 1..<max(k, 1) { row[i] = GF256.mul(row[i - 1], x) }
        return row
    }

    /// Cuts data into stripes and emits each stripe's n segments.
    final class Encoder {
        let k: Int, n: Int
        private let matrix: [[UInt8]]
        private var stripe: [UInt8]
        private var filled = 0
        private let target: () throws -> [UnsafeMutableRawPointer]
        private let emit: (Int) throws -> Void

        /// `emit(segments)` receives each stripe's segments, piece 1's first; they are
        /// valid only during the call.
        convenience init(k: Int, n: Int, emit: @escaping ([UnsafeRawBufferPointer]) throws -> Void) {
            let buffers = (0..<n).map { _ in UnsafeMutableRawPointer.allocate(byteCount: Dispersal.segmentLength, alignment: 64) }
            self.init(k: k, n: n, into: { buffers }) { length in
                try emit(buffers.map { UnsafeRawBufferPointer(start: $0, count: length) })
            }
            owned = buffers
        }

        /// The buffers of the convenience initializer, released with the encoder.
        private var owned: [UnsafeMutableRawPointer] = []

        /// Encodes each stripe into the n buffers (of ``Dispersal/segmentLength`` bytes each)
        /// that `target()` gives, then calls `emit(length)` with the segments' length: the
        /// caller owns the buffers, so no segment is copied on its way out.
        init(k: Int, n: Int, into target: @escaping () throws -> [UnsafeMutableRawPointer], emit: @escaping (Int) throws -> Void) {
            precondition(k >= 1 && k <= n && n <= 255)
            self.k = k
            self.n = n
            self.target = target
            self.emit = emit
            matrix = (1...n).map { Dispersal.row(x: UInt8($0), k: k) }
            stripe = [UInt8](repeating: 0, count: k * Dispersal.segmentLength)
        }

        deinit { owned.forEach { $0.deallocate() } }

        func write(_ bytes: UnsafeRawBufferPointer) throws {
            var offset = 0
            while offset < bytes.count {
                // Whole stripes in the input are encoded where they are, without a copy.
                if filled == 0 && bytes.count - offset >= stripe.count {
                    try encode(rows: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + stripe.count]), segment: Dispersal.segmentLength)
                    offset += stripe.count
                    continue
                }
                let take = min(bytes.count - offset, stripe.count - filled)
                stripe.withUnsafeMutableBytes { ($0.baseAddress! + filled).copyMemory(from: bytes.baseAddress! + offset, byteCount: take) }
                filled += take
                offset += take
                if filled == stripe.count { try encodeStripe(segment: Dispersal.segmentLength) }
            }
        }

        /// Encodes the partial last stripe, if any.
        func finish() throws {
            guard filled > 0 else { return }
            let segment = (filled + k - 1) / k
            for i in filled..<k * segment { stripe[i] = 0 }
            try encodeStripe(segment: segment)
        }

        private func encodeStripe(segment: Int) throws {
            let stripe = self.stripe
            try stripe.withUnsafeBytes { try encode(rows: $0, segment: segment) }
            filled = 0
        }

        /// Piece j's segment is Σ_i x_j^i · d_i; x^0 = 1, so it starts as a copy of d_0.
        private func encode(rows: UnsafeRawBufferPointer, segment: Int) throws {
            let targets = try target()
            let data = rows.baseAddress!.assumingMemoryBound(to: UInt8.self)
            for j in 0..<n {
                let out = targets[j].assumingMemoryBound(to: UInt8.self)
                out.update(from: data, count: segment)
                for i in 1..<k { vault_gf_mul_add(out, data + i * segment, segment, matrix[j][i]) }
            }
            try emit(segment)
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
            output.baseAddress!.initializeMemory(as: UInt8.self, repeating: 0, count: k * length)
            let target = output.baseAddress!.assumingMemoryBound(to: UInt8.self)
            for i in 0..<k {
                for j in 0..<k {
                    vault_gf_mul_add(target + i * length, segments[j].baseAddress!.assumingMemoryBound(to: UInt8.self),
                                     length, inverse[i][j])
                }
            }
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
