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

    @Test func seededRandomIsReproducibleAndSecureRandomIsNot() {
        #expect(SeededRandom(seed: "x").bytes(32) == SeededRandom(seed: "x").bytes(32))
        let seeded = SeededRandom(seed: "x")
        #expect(seeded.bytes(32) != seeded.bytes(32))
        #expect(SecureRandom().bytes(32) != SecureRandom().bytes(32))
    }
}
