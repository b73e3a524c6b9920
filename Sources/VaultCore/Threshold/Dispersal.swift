import CISAL

/// Rabin's information dispersal over GF(2^8): any k of n pieces rebuild the data, each
/// piece about 1/k of it (Krawczyk, "Secret sharing made short").
///
/// The data is the payload stream's ciphertext, and each of its sealed chunks (65552 bytes,
/// the last one 16 to 65552) is a stripe of its own (FORMAT §8): a stripe of s bytes has
/// rows d_0 … d_{k-1} of L = ceil(s / k) bytes, its k·L − s last bytes zero. Piece j
/// (x = j, 1 … n) gets, per stripe, the segment Σ_i x^i · d_i. Any k rows of this
/// Vandermonde matrix are invertible because the x are distinct and non-zero.
///
/// The field is GF(2^8) with the polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11d), and the
/// arithmetic is Intel's ISA-L (`ec_encode_data`), which computes all n segments of a
/// stripe in one pass over its k rows with SIMD tables: 2.3 times the rate of the AVX2
/// kernel of vault's own that it replaced, measured side by side (Docs/DECISIONS.md,
/// "Format v2"). Its lookups depend
/// on the data, which is ciphertext and public; Shamir on secret bytes keeps the
/// constant-time arithmetic of GF256.swift, in its own field (0x11b).
///
/// One stripe per sealed chunk is what lets one core seal, disperse and hash a chunk while
/// it is in that core's cache, and the cores take alternate chunks (``DealLanes``).
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

    /// The product of `a` and `b` in the dispersal's field (0x11d).
    static func mul(_ a: UInt8, _ b: UInt8) -> UInt8 { gf_mul(a, b) }

    /// Row x of the encoding matrix: 1, x, x², …, x^(k-1).
    static func row(x: UInt8, k: Int) -> [UInt8] {
        var row = [UInt8](repeating: 1, count: k)
        for i in 1..<max(k, 1) { row[i] = mul(row[i - 1], x) }
        return row
    }

    /// A matrix made ready for ISA-L: 32 bytes of tables for each coefficient. Read-only
    /// once made, so lanes share it.
    final class Coding: @unchecked Sendable {
        let k: Int, rows: Int
        private let tables: UnsafeMutablePointer<UInt8>

        /// `matrix` has `rows` rows of k coefficients.
        init(matrix: [[UInt8]]) {
            let (k, rows) = (matrix[0].count, matrix.count)
            precondition(k >= 1 && k <= 255 && rows >= 1 && rows <= 255 && matrix.allSatisfy { $0.count == k })
            (self.k, self.rows) = (k, rows)
            tables = .allocate(capacity: 32 * k * rows)
            var flat = matrix.flatMap { $0 }
            ec_init_tables(Int32(k), Int32(rows), &flat, tables)
        }

        deinit { tables.deallocate() }

        /// outputs[j] = Σ_i matrix[j][i] · inputs[i], over `length` bytes of each.
        func apply(_ inputs: [UnsafeRawPointer], length: Int, into outputs: [UnsafeMutableRawPointer]) {
            precondition(inputs.count == k && outputs.count == rows && length >= 0)
            guard length > 0 else { return }
            withUnsafeTemporaryAllocation(of: UnsafeMutablePointer<UInt8>?.self, capacity: k + rows) { pointers in
                for (i, input) in inputs.enumerated() {
                    // ISA-L takes its inputs as `unsigned char **` and only reads them.
                    pointers[i] = UnsafeMutablePointer(mutating: input.assumingMemoryBound(to: UInt8.self))
                }
                for (j, output) in outputs.enumerated() { pointers[k + j] = output.assumingMemoryBound(to: UInt8.self) }
                ec_encode_data(Int32(length), Int32(k), Int32(rows), tables, pointers.baseAddress!, pointers.baseAddress! + k)
            }
        }
    }

    /// Encodes one stripe: `stripe` holds its s data bytes followed by room for k·L − s
    /// more, which this zeroes; piece j's segment goes to `segments[j]`. Returns L.
    static func encode(stripe: UnsafeMutableRawPointer, count: Int, coding: Coding, into segments: [UnsafeMutableRawPointer]) -> Int {
        let k = coding.k
        let length = (count + k - 1) / k
        (stripe + count).initializeMemory(as: UInt8.self, repeating: 0, count: k * length - count)
        coding.apply((0..<k).map { UnsafeRawPointer(stripe + $0 * length) }, length: length, into: segments)
        return length
    }

    /// The encoding matrix's rows for pieces 1 … n.
    static func matrix(k: Int, n: Int) -> [[UInt8]] { (1...n).map { row(x: UInt8($0), k: k) } }

    /// Cuts a stream of data into stripes and emits each stripe's n segments.
    final class Encoder {
        let k: Int, n: Int
        private let coding: Coding
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
            coding = Coding(matrix: Dispersal.matrix(k: k, n: n))
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
            let length = Dispersal.encode(stripe: stripe, count: filled, coding: coding, into: try target())
            filled = 0
            try emit(length)
        }
    }

    /// Rebuilds stripes from k pieces.
    struct Decoder {
        let k: Int
        private let inverse: Coding

        /// A decoder for the pieces with these x (k distinct values in 1 … 255).
        init(xs: [UInt8]) {
            precondition(!xs.isEmpty && Set(xs).count == xs.count && !xs.contains(0))
            k = xs.count
            inverse = Coding(matrix: Dispersal.invert(xs.map { Dispersal.row(x: $0, k: xs.count) }))
        }

        /// One stripe: `segments[j]` is the segment of the piece with x = xs[j], all of
        /// equal length; `output` receives k × that length bytes.
        func decode(_ segments: [UnsafeRawBufferPointer], into output: UnsafeMutableRawBufferPointer) {
            let length = segments[0].count
            precondition(segments.count == k && segments.allSatisfy { $0.count == length } && output.count >= k * length)
            inverse.apply(segments.map { $0.baseAddress! }, length: length, into: (0..<k).map { output.baseAddress! + $0 * length })
        }
    }

    /// The inverse of a square matrix whose rows are distinct rows of the encoding matrix
    /// (Gauss-Jordan, ISA-L's `gf_invert_matrix`). The matrix is public: it depends on the
    /// x only.
    static func invert(_ matrix: [[UInt8]]) -> [[UInt8]] {
        let size = matrix.count
        var flat = matrix.flatMap { $0 }
        var inverse = [UInt8](repeating: 0, count: size * size)
        let status = gf_invert_matrix(&flat, &inverse, Int32(size))
        precondition(status == 0, "rows of a Vandermonde matrix with distinct non-zero x are independent")
        return (0..<size).map { Array(inverse[$0 * size..<($0 + 1) * size]) }
    }
}
