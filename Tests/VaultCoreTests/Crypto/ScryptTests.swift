import Testing
@testable import VaultCore
import VaultTestSupport

@Suite struct ScryptTests {
    @Test func matchesRFC7914() {
        let key = ScryptParameters.derive(
            passphrase: SecureBytes(copying: Array("pleaseletmein".utf8)), salt: Array("SodiumChloride".utf8),
            n: 16384, length: 64)
        #expect(key.withUnsafeBytes(Array.init) == hexBytes(
            "7023bdcb3afd7348461c06cd81fd38ebfda8fbba904f8e3ea9b543f6545da1f2d5432955613f0fcf62d49705242a9af9e61e85dc0d651e40dfcf017b45575887"))
    }

    /// A non-default N must reach the KDF (Padlok once dropped its iteration count): the
    /// result for N = 2^16 is checked against Python's hashlib.scrypt.
    @Test func nonDefaultNReachesTheKDF() throws {
        let parameters = try ScryptParameters(n: 65536)
        #expect(parameters.logN == 16)
        let key = parameters.deriveKey(passphrase: SecureBytes(copying: Array("correct horse".utf8)),
                                       salt: [UInt8](repeating: 0, count: 32))
        #expect(key.withUnsafeBytes(Array.init) == hexBytes("b42d036bcc67f4fc9b43abb75e571d0b4eea6e49bd8241c092247098ee01f0c7"))
    }

    @Test func boundsN() {
        #expect(throws: VaultError.self) { try ScryptParameters(n: 16384) }
        #expect(throws: VaultError.self) { try ScryptParameters(n: 1 << 23) }
        #expect(throws: VaultError.self) { try ScryptParameters(n: 40000) }
        #expect(throws: VaultError.self) { try ScryptParameters(n: 0) }
        #expect((try? ScryptParameters(n: 1 << 22)) != nil)
        #expect(ScryptParameters.default.n == 32768)
    }

    @Test func sealOpensOnlyWithItsPassphrase() throws {
        let secret = SecureBytes(copying: [UInt8](repeating: 0x5A, count: 64))
        let pass = SecureBytes(copying: Array("hunter2".utf8))
        let sealed = PassphraseSeal.seal(secret, passphrase: pass, parameters: .default)
        #expect(sealed.count == PassphraseSeal.headerLength + 16 + 64)
        #expect(try PassphraseSeal.open(sealed, passphrase: pass).constantTimeEquals(secret))
        #expect(throws: VaultError.wrongPassphrase) {
            try PassphraseSeal.open(sealed, passphrase: SecureBytes(copying: Array("hunter3".utf8)))
        }
        var tampered = sealed
        tampered[tampered.count - 1] ^= 1
        #expect(throws: VaultError.wrongPassphrase) { try PassphraseSeal.open(tampered, passphrase: pass) }
    }

    @Test func sealStoresAndBoundsItsN() throws {
        let secret = SecureBytes(copying: [1, 2, 3])
        let pass = SecureBytes(copying: Array("pw".utf8))
        let sealed = PassphraseSeal.seal(secret, passphrase: pass, parameters: try ScryptParameters(logN: 16))
        #expect(sealed[1] == 16)
        #expect(try PassphraseSeal.open(sealed, passphrase: pass).constantTimeEquals(secret))
        // The same seal claiming N = 2^15 derives another key and fails.
        var weaker = sealed
        weaker[1] = 15
        #expect(throws: VaultError.wrongPassphrase) { try PassphraseSeal.open(weaker, passphrase: pass) }
        // A seal asking for N = 2^30 is refused before any work.
        var hostile = sealed
        hostile[1] = 30
        #expect(throws: VaultError.self) { try PassphraseSeal.open(hostile, passphrase: pass) }
        #expect(throws: VaultError.self) { try PassphraseSeal.open(Array(sealed.prefix(20)), passphrase: pass) }
    }
}
