import Foundation
import Testing
@testable import VaultCore
import VaultTestSupport

/// vault's SLIP-39 against Trezor's reference implementation (shamir-mnemonic 0.3.0 from
/// PyPI, in .build-venv, which scripts/test makes): its library through
/// Tests/Interop/slip39_peer.py, and its `shamir` command as a person runs it.
@Suite struct SLIP39InteropTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let python = root.appendingPathComponent(".build-venv/bin/python").path
    static let shamir = root.appendingPathComponent(".build-venv/bin/shamir").path
    static let peer = root.appendingPathComponent("Tests/Interop/slip39_peer.py").path

    static func reference(_ command: String, _ request: [String: Any]) throws -> ProcessResult {
        #expect(FileManager.default.fileExists(atPath: python), "run scripts/test: it makes .build-venv")
        return try ProcessRunner.run(python, [peer, command], stdin: Array(try JSONSerialization.data(withJSONObject: request)))
    }

    /// The reference combines what vault split.
    static func referenceCombines(_ groups: [[Mnemonic]], pick: [[Int]], passphrase: String) throws -> String {
        let chosen = zip(groups, pick).flatMap { group, members in members.map { text(group[$0]) } }
        let result = try reference("combine", ["mnemonics": chosen, "passphrase": passphrase])
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A random layout: from one 2-of-2 group to several groups of up to 5.
    struct Case {
        let secret: [UInt8]
        let passphrase: String
        let scheme: SLIP39Scheme
        let extendable: Bool
        let exponent: Int

        init(random: inout SystemRandomNumberGenerator) {
            secret = (0..<[16, 18, 24, 32].randomElement(using: &random)!).map { _ in UInt8.random(in: 0...255, using: &random) }
            passphrase = ["", "TREZOR", "a longer passphrase, with spaces!"].randomElement(using: &random)!
            let count = Int.random(in: 1...4, using: &random)
            let groups = (0..<count).map { _ -> SLIP39Scheme.Group in
                let n = Int.random(in: 1...5, using: &random)
                return SLIP39Scheme.Group(threshold: n == 1 ? 1 : Int.random(in: 2...n, using: &random), count: n)
            }
            scheme = SLIP39Scheme(groupThreshold: Int.random(in: 1...count, using: &random), groups: groups)
            extendable = Bool.random(using: &random)
            exponent = Int.random(in: 0...1, using: &random)
        }

        /// The first groups' first members: exactly what the set needs.
        var pick: [[Int]] {
            scheme.groups.prefix(scheme.groupThreshold).map { Array(0..<$0.threshold) }
        }

        var json: [String: Any] {
            ["secret": secret.hex, "passphrase": passphrase, "group_threshold": scheme.groupThreshold,
             "groups": scheme.groups.map { [$0.threshold, $0.count] }, "extendable": extendable, "exponent": exponent]
        }
    }

    @Test func theReferenceCombinesWhatVaultSplits() throws {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<12 {
            let c = Case(random: &random)
            let groups = try SLIP39.split(SecureBytes(copying: c.secret), passphrase: SecureBytes(copying: Array(c.passphrase.utf8)),
                                          scheme: c.scheme, extendable: c.extendable, exponent: c.exponent)
            #expect(try Self.referenceCombines(groups, pick: c.pick, passphrase: c.passphrase) == c.secret.hex, "\(c.json)")
        }
    }

    @Test func vaultCombinesWhatTheReferenceSplits() throws {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<12 {
            let c = Case(random: &random)
            let made = try Self.reference("split", c.json)
            #expect(made.status == 0, "\(made.stderr)")
            let groups = try JSONSerialization.jsonObject(with: Data(made.stdout.utf8)) as! [[String]]
            // The last groups this time, their last members, in reverse order.
            let chosen = zip(groups, c.scheme.groups).suffix(c.scheme.groupThreshold).flatMap { words, group in
                words.suffix(group.threshold).reversed()
            }
            let secret = try SLIP39.combine(try chosen.flatMap { try mnemonics($0) }, passphrase: SecureBytes(copying: Array(c.passphrase.utf8)))
            #expect(hex(secret) == c.secret.hex, "\(c.json)")
        }
    }

    /// Group shares, two levels, as the standard's example: 2 of 4 groups, Alice's own two
    /// 1-of-1 groups, friends 3 of 5 and family 2 of 6; friends and family recover without
    /// Alice, and either of Alice's shares with the family.
    @Test func groupSharesBothWays() throws {
        let secret = SecureRandom().bytes(32)
        let scheme = SLIP39Scheme(groupThreshold: 2, groups: [.init(threshold: 1, count: 1), .init(threshold: 1, count: 1),
                                                             .init(threshold: 3, count: 5), .init(threshold: 2, count: 6)])
        let groups = try SLIP39.split(SecureBytes(copying: secret), passphrase: SecureBytes(copying: Array("family".utf8)), scheme: scheme)
        let friendsAndFamily = [groups[2][4], groups[2][0], groups[2][2], groups[3][5], groups[3][1]].map(text)
        let combined = try Self.reference("combine", ["mnemonics": friendsAndFamily, "passphrase": "family"])
        #expect(combined.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == secret.hex)
        #expect(try Self.referenceCombines(groups, pick: [[0], [], [], [3, 4]], passphrase: "family") == secret.hex)
        // Two family members and two friends are not enough.
        let short = try Self.reference("combine", ["mnemonics": [groups[2][0], groups[2][1], groups[3][0], groups[3][1]].map(text),
                                                   "passphrase": "family"])
        #expect(short.status == 1)
        #expect(throws: VaultError.self) {
            try SLIP39.combine([groups[2][0], groups[2][1], groups[3][0], groups[3][1]], passphrase: SecureBytes(copying: Array("family".utf8)))
        }
    }

    /// The passphrase as SLIP-39 defines it: the same words under another passphrase give
    /// another secret on both sides, and the same other secret.
    @Test func aWrongPassphraseGivesAnotherSecretOnBothSides() throws {
        let secret = SecureRandom().bytes(16)
        let groups = try SLIP39.split(SecureBytes(copying: secret), passphrase: SecureBytes(copying: Array("right".utf8)),
                                      scheme: .single(threshold: 2, count: 3))
        let wrongHere = hex(try SLIP39.combine([groups[0][0], groups[0][2]], passphrase: SecureBytes(copying: Array("wrong".utf8))))
        let wrongThere = try Self.referenceCombines(groups, pick: [[0, 2]], passphrase: "wrong")
        #expect(wrongHere != secret.hex && wrongHere == wrongThere)
        #expect(throws: VaultError.self) {
            try SLIP39.split(SecureBytes(copying: secret), passphrase: SecureBytes(copying: Array("café".utf8)), scheme: .single(threshold: 2, count: 3))
        }
    }

    /// The `shamir` command itself, as a person would run it: `shamir create 2of3` makes
    /// the words vault combines, and `shamir recover` takes vault's words on its prompt.
    @Test func theShamirCommandBothWays() throws {
        let secret = SecureRandom().bytes(32)
        let created = try ProcessRunner.run(Self.shamir, ["create", "3of5", "--master-secret", secret.hex], environment: ["NO_COLOR": "1"])
        #expect(created.status == 0, "\(created.stderr)")
        let lines = created.stdout.split(separator: "\n").map(String.init).filter { $0.split(separator: " ").count == 33 }
        #expect(lines.count == 5)
        let recovered = try SLIP39.combine(try mnemonics([lines[4], lines[1], lines[3]].joined(separator: "\n")), passphrase: SecureBytes(count: 0))
        #expect(hex(recovered) == secret.hex)

        let groups = try SLIP39.split(SecureBytes(copying: secret), passphrase: SecureBytes(count: 0), scheme: .single(threshold: 2, count: 3))
        let typed = [groups[0][2], groups[0][0]].map { text($0) + "\n" }.joined()
        let recovery = try ProcessRunner.run(Self.shamir, ["recover"], stdin: Array(typed.utf8))
        #expect(recovery.status == 0, "\(recovery.stdout)\(recovery.stderr)")
        #expect(recovery.stdout.contains(secret.hex), "\(recovery.stdout)")

        // Under a passphrase, as a kit's instructions say: `shamir recover -p` asks for it
        // after the words (twice), and without -p it would use the empty one.
        let locked = try SLIP39.split(SecureBytes(copying: secret), passphrase: SecureBytes(copying: Array("TREZOR".utf8)),
                                      scheme: .single(threshold: 2, count: 3))
        let lockedTyped = [locked[0][1], locked[0][2]].map { text($0) + "\n" }.joined() + "TREZOR\nTREZOR\n"
        let unlocked = try ProcessRunner.run(Self.shamir, ["recover", "-p"], stdin: Array(lockedTyped.utf8))
        #expect(unlocked.status == 0, "\(unlocked.stdout)\(unlocked.stderr)")
        #expect(unlocked.stdout.contains(secret.hex), "\(unlocked.stdout)")
    }
}

/// Typed and pasted mnemonics: what is accepted, and errors that name the word.
@Suite struct MnemonicReaderTests {
    static let words = "shadow pistol academic always adequate wildlife fancy gross oasis cylinder mustang wrist rescue view short owner flip making coding armed"

    @Test func acceptsCaseNumbersPrefixesAndLinesBrokenAsOnPaper() throws {
        let broken = "1. SHADOW 2. pistol 3. acad 4. alwa 5. adequate\nwildlife fancy gross oasis cylinder\nmustang wrist rescue view short\nowner flip making coding armed\n"
        #expect(try mnemonics(broken).map(text) == [Self.words])
        let two = try mnemonics(Self.words + "\n" + Self.words + "\n")
        #expect(two.count == 2)
    }

    @Test func aMistypedWordIsNamed() throws {
        var changed = Self.words.split(separator: " ").map(String.init)
        changed[8] = "ocean"
        let error = #expect(throws: VaultError.self) { try SLIP39.combine(try mnemonics(changed.joined(separator: " ")), passphrase: SecureBytes(count: 0)) }
        #expect("\(error!)".contains("word 9 ('ocean') is wrong"), "\(error!)")
        changed[8] = "oasys"
        let unknown = #expect(throws: VaultError.self) { try mnemonics(changed.joined(separator: " ")) }
        #expect("\(unknown!)".contains("word 9: 'oasys' is not a SLIP-39 word; did you mean 'oasis'?"), "\(unknown!)")
        let short = #expect(throws: VaultError.self) {
            try SLIP39.combine(try mnemonics(Self.words.split(separator: " ").dropLast().joined(separator: " ")), passphrase: SecureBytes(count: 0))
        }
        #expect("\(short!)".contains("has 19 words"), "\(short!)")
    }
}

/// A vault secret's words: the layout, the limits, and one set however often it is dealt.
@Suite struct SecretWordsTests {
    static func header(type: SecretType = .key, k: Int = 2, n: Int = 3) -> BundleHeader {
        let card = try! Keystore.create(home: VaultHome(directory: TemporaryDirectory("vault-words").file("h")), label: Label("dealer"),
                                        passphrase: nil, random: SeededRandom(seed: "words")).identityInfo().card
        let zero = [UInt8](repeating: 0, count: 32)
        return BundleHeader(secretID: Array(repeating: 7, count: 16), createdAt: 0, type: type, description: "", threshold: k, count: n,
                            holderIndex: 1, ciphertextLength: 100, dealer: card, holderKey: zero, senderKey: zero, passwordProtected: false,
                            replaces: nil, keyID: type == .key ? Array(repeating: 7, count: 16) : nil, labels: nil,
                            commitments: Array(repeating: zero, count: n), possessionKeys: Array(repeating: zero, count: n),
                            holderTags: Array(repeating: zero, count: n))
    }

    @Test func theSameSecretGivesTheSameSetAndAnotherLayoutAnother() throws {
        let secret = SecureRandom().secureBytes(32)
        let none = SecureBytes(count: 0)
        let once = try SecretWords.deal(secret, header: Self.header(), passphrase: none, split: nil)
        let again = try SecretWords.deal(secret, header: Self.header(), passphrase: none, split: nil)
        #expect(once.map { $0.map(text) } == again.map { $0.map(text) })
        #expect(once.count == 3 && once.allSatisfy { $0.count == 1 })
        #expect(hex(try SLIP39.combine([once[2][0], once[0][0]], passphrase: none)) == hex(secret))
        let split = try SecretWords.deal(secret, header: Self.header(), passphrase: none, split: .init(threshold: 2, count: 3))
        #expect(split.count == 3 && split.allSatisfy { $0.count == 3 })
        #expect(text(split[0][0]).prefix(20) != text(once[0][0]).prefix(20))
        #expect(hex(try SLIP39.combine([split[1][2], split[1][0], split[2][1], split[2][2]], passphrase: none)) == hex(secret))
        let other = try SecretWords.deal(secret, header: Self.header(), passphrase: SecureBytes(copying: Array("p".utf8)), split: nil)
        #expect(text(other[0][0]) != text(once[0][0]))
    }

    @Test func refusesWhatTheWordsCannotCarry() {
        let none = SecureBytes(count: 0)
        for (secret, header, words) in [
            (SecureRandom().secureBytes(33), Self.header(type: .note), "16 to 32 bytes, an even number, and this secret has 33"),
            (SecureRandom().secureBytes(21), Self.header(type: .note), "and this secret has 21"),
            (SecureRandom().secureBytes(32), Self.header(type: .file), "is a file; SLIP-39 words carry keys and notes"),
            (SecureRandom().secureBytes(32), Self.header(k: 2, n: 17), "at most 16 shares in a group"),
        ] {
            let error = #expect(throws: VaultError.self) { try SecretWords.deal(secret, header: header, passphrase: none, split: nil) }
            #expect("\(error!)".contains(words), "\(error!)")
        }
    }
}
