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
    /// neighbours. A buffer larger than an arena slot has pages of its own, fenced by
    /// inaccessible guard pages.
    @Test func largeBuffersHavePagesOfTheirOwn() throws {
        let length = SecretArena.slotLength + 1
        let a = SecureBytes(copying: [UInt8](repeating: 0xa5, count: length))
        var b: SecureBytes? = SecureBytes(copying: [UInt8](repeating: 0x5a, count: length))
        let maps = try Mappings()
        let aStart = a.withUnsafeBytes { UInt(bitPattern: $0.baseAddress!) }
        let bStart = b!.withUnsafeBytes { UInt(bitPattern: $0.baseAddress!) }
        var regions: [Mappings.Region] = []
        for start in [aStart, bStart] {
            let region = try #require(maps.region(containing: start))
            regions.append(region)
            #expect(region.permissions.hasPrefix("rw"))
            #expect(region.upper >= start + UInt(length))
            // Nothing else lives in the buffer's pages: the pages on either side are guards.
            #expect(maps.isFenced(region))
        }
        #expect(regions[0].lower != regions[1].lower)
        b = nil
        #expect(a.withUnsafeBytes(Array.init) == [UInt8](repeating: 0xa5, count: length))
    }

    /// Finding 10, for small secrets: they share the arena's regions, which are fenced by
    /// guard pages and stay locked whatever is released beside them.
    @Test func smallSecretsStayLockedWhenNeighboursGo() throws {
        let a = SecureBytes(copying: [UInt8](repeating: 0xa5, count: 32))
        let neighbours = (0..<64).map { _ in SecureBytes(count: 32) }
        let start = a.withUnsafeBytes { UInt(bitPattern: $0.baseAddress!) }
        _ = consume neighbours
        let maps = try Mappings()
        let region = try #require(maps.region(containing: start))
        #expect(region.permissions.hasPrefix("rw"))
        #expect(maps.isFenced(region))
        // Root (tests and CI) may always lock; the kernel reports what stays locked.
        if geteuid() == 0 { #expect(try Mappings.lockedKiB(of: region) == (region.upper - region.lower) / 1024) }
        #expect(a.withUnsafeBytes(Array.init) == [UInt8](repeating: 0xa5, count: 32))
    }

    /// A released slot is zeroed before anyone gets it again, and live slots never overlap.
    @Test func arenaSlotsAreZeroedAndDistinct() {
        let arena = SecretArena()
        let first = arena.allocate()
        first.initializeMemory(as: UInt8.self, repeating: 0xff, count: SecretArena.slotLength)
        arena.release(first)
        let again = arena.allocate()
        #expect(again == first)
        #expect(UnsafeRawBufferPointer(start: again, count: SecretArena.slotLength).allSatisfy { $0 == 0 })
        let slots = (0..<(SecretArena.regionLength / SecretArena.slotLength + 10)).map { _ in arena.allocate() }
        let starts = Set(slots.map { UInt(bitPattern: $0) } + [UInt(bitPattern: again)])
        #expect(starts.count == slots.count + 1)
        let sorted = starts.sorted()
        #expect(zip(sorted, sorted.dropFirst()).allSatisfy { $1 - $0 >= UInt(SecretArena.slotLength) })
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

    /// Whether the pages on either side of `region` are inaccessible guards.
    func isFenced(_ region: Region) -> Bool {
        let before = self.region(containing: region.lower - 1)?.permissions, after = self.region(containing: region.upper)?.permissions
        return before?.hasPrefix("---") == true && after?.hasPrefix("---") == true
    }

    /// The kibibytes of `region` that are locked in memory, from /proc/self/smaps.
    static func lockedKiB(of region: Region) throws -> UInt? {
        let handle = try #require(FileHandle(forReadingAtPath: "/proc/self/smaps"))
        defer { try? handle.close() }
        let text = String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
        let header = String(region.lower, radix: 16) + "-" + String(region.upper, radix: 16) + " "
        var inside = false
        for line in text.split(separator: "\n") {
            if line.first?.isHexDigit == true && line.contains("-") && line.split(separator: " ").count >= 5 {
                inside = line.hasPrefix(header)
            } else if inside, line.hasPrefix("Locked:") {
                return UInt(line.split(separator: " ")[1])
            }
        }
        return nil
    }
}
