import CVaultGF
import Testing
@testable import VaultCore
import VaultTestSupport

@Suite(.serialized) struct DispersalTests {
    func disperse(_ data: [UInt8], k: Int, n: Int) throws -> [[UInt8]] {
        var pieces = Array(repeating: [UInt8](), count: n)
        let encoder = Dispersal.Encoder(k: k, n: n) { segments in
            for (j, segment) in segments.enumerated() { pieces[j] += segment }
        }
        try data.withUnsafeBytes { try encoder.write($0) }
        try encoder.finish()
        return pieces
    }

    func recombine(_ pieces: [(x: UInt8, bytes: [UInt8])], dataLength: Int, k: Int) -> [UInt8] {
        let decoder = Dispersal.Decoder(xs: pieces.map(\.x))
        let layout = Dispersal.segments(dataLength: UInt64(dataLength), k: k)
        var out: [UInt8] = [], offset = 0
        var stripe = [UInt8](repeating: 0, count: k * Dispersal.maximumSegmentLength)
        let lengths = Array(repeating: Dispersal.segmentLength(k: k), count: Int(layout.full)) + (layout.last > 0 ? [layout.last] : [])
        for length in lengths {
            let segments = pieces.map { Array($0.bytes[offset..<offset + length]) }
            stripe.withUnsafeMutableBytes { target in
                let buffers = segments.map { $0.withUnsafeBytes { UnsafeRawBufferPointer(start: UnsafeMutableRawPointer.allocate(byteCount: $0.count, alignment: 1), count: $0.count) } }
                for (buffer, segment) in zip(buffers, segments) { UnsafeMutableRawBufferPointer(mutating: buffer).copyBytes(from: segment) }
                decoder.decode(buffers, into: target)
                buffers.forEach { $0.deallocate() }
            }
            out += stripe[0..<(offset + length == pieces[0].bytes.count && layout.last > 0 ? layout.lastData : Dispersal.stripeLength)]
            offset += length
        }
        return out
    }

    @Test(arguments: [(3, 5, 1), (3, 5, 1000), (3, 5, 3 * 65536), (3, 5, 3 * 65536 + 7), (2, 2, 100_000),
                      (5, 5, 65537), (4, 7, 300_000), (1, 1, 10), (3, 5, 65552), (3, 5, 2 * 65552 + 1), (2, 3, 65553)])
    func everyKSubsetRebuilds(k: Int, n: Int, length: Int) throws {
        let data = SecureRandom().bytes(length)
        let pieces = try disperse(data, k: k, n: n)
        let expected = Dispersal.pieceLength(dataLength: UInt64(length), k: k)
        #expect(pieces.allSatisfy { UInt64($0.count) == expected })
        // Each stripe (a sealed chunk) pads fewer than k bytes.
        let stripes = UInt64((length + Dispersal.stripeLength - 1) / Dispersal.stripeLength)
        #expect(expected * UInt64(k) >= UInt64(length) && expected * UInt64(k) < UInt64(length) + UInt64(k) * stripes)
        for subset in subsets(of: n, size: k) {
            let chosen = subset.map { (x: UInt8($0 + 1), bytes: pieces[$0]) }
            #expect(recombine(chosen, dataLength: length, k: k) == data)
        }
    }

    @Test func aDamagedPieceChangesTheResult() throws {
        let data = SecureRandom().bytes(5000)
        var pieces = try disperse(data, k: 3, n: 5)
        pieces[1][10] ^= 1
        #expect(recombine([(1, pieces[0]), (2, pieces[1]), (3, pieces[2])], dataLength: 5000, k: 3) != data)
    }

    @Test(arguments: [1, 2, 3, 5, 17])
    func simdKernelMatchesTheScalarOne(k: Int) {
        let length = 1000
        let rows = (0..<k).map { _ in SecureRandom().bytes(length) }
        let coefficients = (0..<k).map { $0 == 1 ? 0 : UInt8.random(in: 1...255) }
        func combine() -> [UInt8] {
            var out = [UInt8](repeating: 0xEE, count: length)
            let copies = rows.map { row in
                let copy = UnsafeMutablePointer<UInt8>.allocate(capacity: length)
                copy.initialize(from: row, count: length)
                return copy
            }
            defer { copies.forEach { $0.deallocate() } }
            vault_gf_combine(&out, copies.map { UnsafePointer($0) }, coefficients, k, length)
            return out
        }
        let fast = combine()
        vault_gf_force_scalar(1)
        let slow = combine()
        vault_gf_force_scalar(0)
        #expect(fast == slow)
        for b in [0, 31, 32, length - 1] {
            #expect(fast[b] == (0..<k).reduce(0) { $0 ^ GF256.mul(coefficients[$1], rows[$1][b]) })
        }
    }

    @Test func invertsVandermondeMatrices() {
        for xs in [[1, 2, 3], [5, 9, 200, 255], [7]] as [[UInt8]] {
            let matrix = xs.map { Dispersal.row(x: $0, k: xs.count) }
            let inverse = Dispersal.invert(matrix)
            for i in 0..<xs.count {
                for j in 0..<xs.count {
                    var sum: UInt8 = 0
                    for m in 0..<xs.count { sum ^= GF256.mul(matrix[i][m], inverse[m][j]) }
                    #expect(sum == (i == j ? 1 : 0))
                }
            }
        }
    }
}
