import Foundation
import Testing
@testable import VaultCore
import VaultTestSupport

/// The mnemonics of `text`, one a line or separated as a person would.
func mnemonics(_ text: String) throws -> [Mnemonic] {
    try MnemonicReader.mnemonics(in: SecureBytes(copying: Array(text.utf8)))
}

func text(_ mnemonic: Mnemonic) -> String { mnemonic.text().withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }

func hex(_ bytes: SecureBytes) -> String { bytes.withUnsafeBytes { Array($0).hex } }

/// SLIP-39's published vectors (Vectors/README.md), read both ways: every valid set
/// combines to its secret with the passphrase "TREZOR", every invalid one is refused, and
/// each valid mnemonic, parsed and written again, gives back its own words.
@Suite struct SLIP39VectorTests {
    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Vectors/vectors.json")
    static var passphrase: SecureBytes { SecureBytes(copying: Array("TREZOR".utf8)) }

    static func vectors() throws -> [(description: String, mnemonics: [String], secret: String)] {
        let entries = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as! [[Any]]
        return entries.map { ($0[0] as! String, $0[1] as! [String], $0[2] as! String) }
    }

    @Test func theVectorsAreAllThere() throws {
        let vectors = try Self.vectors()
        #expect(vectors.count == 45)
        #expect(vectors.filter { !$0.secret.isEmpty }.count == 15)
    }

    @Test func everyValidSetCombinesAndEveryInvalidOneIsRefused() throws {
        for vector in try Self.vectors() {
            let result: Result<SecureBytes, Error> = Result {
                try SLIP39.combine(try vector.mnemonics.flatMap { try mnemonics($0) }, passphrase: Self.passphrase)
            }
            switch result {
            case .success(let secret):
                #expect(hex(secret) == vector.secret, "\(vector.description)")
            case .failure(let error):
                #expect(vector.secret.isEmpty, "\(vector.description): \(error)")
                #expect(error is VaultError, "\(vector.description)")
            }
        }
    }

    @Test func validMnemonicsRoundTrip() throws {
        for vector in try Self.vectors() where !vector.secret.isEmpty {
            for words in vector.mnemonics {
                let mnemonic = try #require(try mnemonics(words).first)
                let share = try SLIP39Share(mnemonic)
                #expect(text(share.mnemonic()) == words, "\(vector.description)")
            }
        }
    }

    /// The iteration exponent read from the words reaches PBKDF2: the same share value
    /// under exponent 0 and 1 decrypts to different secrets, and vector 7's sets, which
    /// differ only there, are refused as two sets.
    @Test func theExponentReachesTheCipher() throws {
        let secret = SecureBytes(copying: hexBytes("bb54aac4b89dc868ba37d9cc21b2cece"))
        let zero = SLIP39Cipher.encrypt(secret, passphrase: Self.passphrase, exponent: 0, identifier: 7, extendable: true)
        let one = SLIP39Cipher.encrypt(secret, passphrase: Self.passphrase, exponent: 1, identifier: 7, extendable: true)
        #expect(hex(zero) != hex(one))
        #expect(hex(SLIP39Cipher.decrypt(one, passphrase: Self.passphrase, exponent: 1, identifier: 7, extendable: true)) == hex(secret))
        // Not extendable: the identifier is in the salt.
        let other = SLIP39Cipher.encrypt(secret, passphrase: Self.passphrase, exponent: 0, identifier: 8, extendable: false)
        #expect(hex(other) != hex(SLIP39Cipher.encrypt(secret, passphrase: Self.passphrase, exponent: 0, identifier: 7, extendable: false)))
    }
}

/// The committed wordlist is the standard's, word for word.
@Suite struct WordlistTests {
    /// SHA-256 of slip-0039/wordlist.txt in satoshilabs/slips (one word a line, each line
    /// ending in a newline), the file shamir-mnemonic 0.3.0 ships as well.
    static let published = "bcc4555340332d169718aed8bf31dd9d5248cb7da6e5d355140ef4f1e601eec3"

    @Test func matchesThePublishedFile() {
        let file = SLIP39Wordlist.words.map { $0 + "\n" }.joined()
        let hasher = SHA256Hasher()
        Array(file.utf8).withUnsafeBytes { hasher.update($0) }
        #expect(hasher.finish().hex == Self.published)
        #expect(SLIP39Wordlist.words.count == 1024)
        #expect(Set(SLIP39Wordlist.words.map { $0.prefix(4) }).count == 1024)
    }
}
