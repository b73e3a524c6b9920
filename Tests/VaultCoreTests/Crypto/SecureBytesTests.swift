import Foundation
import Testing
@testable import VaultCore
import VaultTestSupport

@Suite struct SecureBytesTests {
    @Test func copiesComparesAndSlices() {
        let a = SecureBytes(copying: [1, 2, 3, 4])
        #expect(a.count == 4)
        #expect(a.constantTimeEquals(SecureBytes(copying: [1, 2, 3, 4])))
        #expect(!a.constantTimeEquals(SecureBytes(copying: [1, 2, 3, 5])))
        #expect(!a.constantTimeEquals(SecureBytes(copying: [1, 2, 3])))
        #expect(a.slice(1..<3).withUnsafeBytes(Array.init) == [2, 3])
    }

    @Test func describesNoContent() {
        let a = SecureBytes(copying: Array("top secret".utf8))
        #expect(!String(describing: a).contains("top secret"))
        #expect(!String(reflecting: a).contains("116"))
    }

    /// Finding 10: small secrets shared locked pages, so unlocking one unlocked its
    /// neighbours. Each buffer now has its own pages, fenced by inaccessible guard pages.
    @Test func eachBufferHasPagesOfItsOwn() throws {
        let a = SecureBytes(copying: [UInt8](repeating: 0xa5, count: 32))
        var b: SecureBytes? = SecureBytes(copying: [UInt8](repeating: 0x5a, count: 32))
        let maps = try Mappings()
        let aStart = a.withUnsafeBytes { UInt(bitPattern: $0.baseAddress!) }
        let bStart = b!.withUnsafeBytes { UInt(bitPattern: $0.baseAddress!) }
        var regions: [Mappings.Region] = []
        for start in [aStart, bStart] {
            let region = try #require(maps.region(containing: start))
            regions.append(region)
            #expect(region.permissions.hasPrefix("rw"))
            #expect(region.upper >= start + 32)
            // Nothing else lives in the buffer's pages: the pages on either side are guards.
            let before = maps.region(containing: region.lower - 1)?.permissions, after = maps.region(containing: region.upper)?.permissions
            #expect(before?.hasPrefix("---") == true && after?.hasPrefix("---") == true)
        }
        #expect(regions[0].lower != regions[1].lower)
        b = nil
        #expect(a.withUnsafeBytes(Array.init) == [UInt8](repeating: 0xa5, count: 32))
    }

    /// Thousands of buffers, past what RLIMIT_MEMLOCK lets a process lock, still work.
    @Test func manyBuffersWorkPastTheLockLimit() {
        let buffers = (0..<5000).map { SecureBytes(copying: [UInt8(truncatingIfNeeded: $0), 1, 2]) }
        #expect(buffers.enumerated().allSatisfy { $1.withUnsafeBytes(Array.init) == [UInt8(truncatingIfNeeded: $0), 1, 2] })
        #expect(SecureBytes(count: 0).withUnsafeBytes(\.count) == 0)
    }

    @Test func seededRandomIsReproducibleAndSecureRandomIsNot() {
        #expect(SeededRandom(seed: "x").bytes(32) == SeededRandom(seed: "x").bytes(32))
        let seeded = SeededRandom(seed: "x")
        #expect(seeded.bytes(32) != seeded.bytes(32))
        #expect(SecureRandom().bytes(32) != SecureRandom().bytes(32))
    }
}

/// This process's memory mappings, from /proc/self/maps.
private struct Mappings {
    struct Region { let lower: UInt, upper: UInt, permissions: String }
    let regions: [Region]

    init() throws {
        // /proc files report size 0, so read to the end rather than by the reported size.
        let handle = try #require(FileHandle(forReadingAtPath: "/proc/self/maps"))
        defer { try? handle.close() }
        let text = String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
        regions = text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            let bounds = fields[0].split(separator: "-")
            guard fields.count >= 2, bounds.count == 2, let lower = UInt(bounds[0], radix: 16),
                  let upper = UInt(bounds[1], radix: 16) else { return nil }
            return Region(lower: lower, upper: upper, permissions: String(fields[1]))
        }
    }

    func region(containing address: UInt) -> Region? {
        regions.first { $0.lower <= address && address < $0.upper }
    }
}
