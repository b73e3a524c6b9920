import Testing
@testable import VaultCore
import VaultTestSupport

@Suite struct DispersalTests {
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

    /// The product in GF(2^8) with the polynomial 0x11d, written out bit by bit: an
    /// implementation independent of ISA-L's tables (and the one Tests/Interop/recombine.py
    /// uses), so a kernel in another field, or a wrong one, cannot pass.
    static func product(_ a: UInt8, _ b: UInt8) -> UInt8 {
        var (a, b, p) = (a, b, UInt8(0))
        for _ in 0..<8 {
            if b & 1 == 1 { p ^= a }
            a = a & 0x80 != 0 ? (a << 1) ^ 0x1D : a << 1
            b >>= 1
        }
        return p
    }

    @Test(arguments: [(1, 1, 1000), (2, 3, 63), (3, 5, 64), (3, 5, 21851), (5, 5, 65), (17, 20, 1000), (1, 4, 16)])
    func theCodingIsTheMatrixProductInTheField(k: Int, rows: Int, length: Int) {
        let inputs = (0..<k).map { _ in SecureRandom().bytes(length) }
        let matrix = (0..<rows).map { j in (0..<k).map { i in j == 1 && i == 0 ? 0 : UInt8.random(in: 1...255) } }
        let outputs = (0..<rows).map { _ in UnsafeMutableRawPointer.allocate(byteCount: length, alignment: 64) }
        defer { outputs.forEach { $0.deallocate() } }
        outputs.forEach { $0.initializeMemory(as: UInt8.self, repeating: 0xEE, count: length) }
        let copies = inputs.map { input in
            let copy = UnsafeMutableRawPointer.allocate(byteCount: length, alignment: 1)
            input.withUnsafeBytes { copy.copyMemory(from: $0.baseAddress!, byteCount: length) }
            return copy
        }
        defer { copies.forEach { $0.deallocate() } }
        Dispersal.Coding(matrix: matrix).apply(copies.map { UnsafeRawPointer($0) }, length: length, into: outputs)
        for j in 0..<rows {
            let got = Array(UnsafeRawBufferPointer(start: outputs[j], count: length))
            let expected = (0..<length).map { b in (0..<k).reduce(UInt8(0)) { $0 ^ Self.product(matrix[j][$1], inputs[$1][b]) } }
            #expect(got == expected, "row \(j) of \(rows), k \(k), \(length) bytes")
        }
        for (x, y) in [(2, 0x80), (0x53, 0xCA), (255, 255), (0, 7)] as [(UInt8, UInt8)] {
            #expect(Dispersal.mul(x, y) == Self.product(x, y))
        }
    }

    @Test func invertsVandermondeMatrices() {
        for xs in [[1, 2, 3], [5, 9, 200, 255], [7], Array(1...40)] as [[UInt8]] {
            let matrix = xs.map { Dispersal.row(x: $0, k: xs.count) }
            let inverse = Dispersal.invert(matrix)
            for i in 0..<xs.count {
                for j in 0..<xs.count {
                    var sum: UInt8 = 0
                    for m in 0..<xs.count { sum ^= Self.product(matrix[i][m], inverse[m][j]) }
                    #expect(sum == (i == j ? 1 : 0))
                }
            }
        }
    }
}
