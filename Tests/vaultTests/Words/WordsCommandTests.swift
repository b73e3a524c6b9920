import Foundation
import Testing
import VaultTestSupport

/// SLIP-39 words from the built binary: 'vault secrets export-words' and 'vault
/// recover-words', checked against Trezor's `shamir` (shamir-mnemonic from PyPI, in
/// .build-venv) both ways.
@Suite struct WordsCommandTests {
    static let python = ForeignNoiseTests.root.appendingPathComponent(".build-venv/bin/python").path
    static let shamir = ForeignNoiseTests.root.appendingPathComponent(".build-venv/bin/shamir").path
    static let peer = ForeignNoiseTests.root.appendingPathComponent("Tests/Interop/slip39_peer.py").path

    /// The mnemonics in an export's output, by holder label.
    static func mnemonics(_ output: String) -> [String: [String]] {
        var out: [String: [String]] = [:], holder = ""
        for line in output.split(separator: "\n").map(String.init) {
            if line.hasPrefix("# ") {
                if let range = line.range(of: " (holder ") { holder = String(line.dropFirst(2)[..<range.lowerBound]) }
            } else if !line.isEmpty {
                out[holder, default: []].append(line)
            }
        }
        return out
    }

    /// The reference library combines `mnemonics` under `passphrase`.
    static func referenceCombines(_ mnemonics: [String], passphrase: String = "") throws -> String {
        let request = try JSONSerialization.data(withJSONObject: ["mnemonics": mnemonics, "passphrase": passphrase])
        let result = try ProcessRunner.run(python, [peer, "combine"], stdin: Array(request))
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// alice deals a key to bob and carol, 2 of 3; returns the circle, the id and the key's hex.
    static func sharedKey() throws -> (Circle, String, String) {
        let circle = try Circle(["alice", "bob", "carol"])
        let id = try circle.share(from: "alice", ["--to", "bob,carol", "-k", "2", "--type", "key", "--labels"])
        // vault makes the key; 'vault recover' shows it in hex.
        let key = try circle["alice"].ok(["recover", id, "--piece", try circle.release(id, from: "bob", to: "alice")])
        #expect(key.count == 65)
        return (circle, id, key.trimmingCharacters(in: .newlines))
    }

    @Test func theDealerExportsEveryHoldersWordsAndShamirRecombinesThem() throws {
        let (circle, id, key) = try Self.sharedKey()
        let piece = try circle.release(id, from: "carol", to: "alice")
        let export = try circle["alice"].vault.run(["secrets", "export-words", id, "--piece", piece, "--no-words-passphrase"])
        #expect(export.status == 0, "\(export.stderr)")
        // A key is drawn at random: its words carry no warning.
        #expect(!export.stderr.contains("warning"), "\(export.stderr)")
        let words = Self.mnemonics(export.stdout)
        #expect(Set(words.keys) == ["alice", "bob", "carol"] && words.values.allSatisfy { $0.count == 1 && $0[0].split(separator: " ").count == 33 })
        #expect(export.stdout.contains("any 2 of these 3 holders' mnemonics recover it"))
        // The reference's own command, as a person would type the words in.
        let typed = words["carol"]![0] + "\n" + words["bob"]![0] + "\n"
        let recovered = try ProcessRunner.run(Self.shamir, ["recover"], stdin: Array(typed.utf8))
        #expect(recovered.status == 0 && recovered.stdout.contains(key), "\(recovered.stdout)")
        // vault reads them back with no keystore: the export as it is, or two mnemonics.
        let nobody = User()
        #expect(try nobody.ok(["recover-words", "--no-words-passphrase"], stdin: export.stdout) == key + "\n")
        #expect(try nobody.ok(["recover-words", "--no-words-passphrase"], stdin: typed) == key + "\n")
        #expect(!FileManager.default.fileExists(atPath: nobody.vault.home))

        // A holder exports its own words, and they are the dealer's for it: one set.
        let own = try circle["bob"].vault.run(["secrets", "export-words", id, "--piece", try circle.release(id, from: "carol", to: "bob"),
                                              "--no-words-passphrase"])
        #expect(own.status == 0, "\(own.stderr)")
        #expect(Self.mnemonics(own.stdout) == ["bob": words["bob"]!])
        // But never another holder's.
        let refused = try circle["bob"].fails(["secrets", "export-words", id, "--holder", "carol", "--piece", try circle.release(id, from: "carol", to: "bob"),
                                              "--no-words-passphrase"])
        #expect(refused.contains("only the dealer writes other holders' words"), "\(refused)")
    }

    @Test func shamirMakesAndVaultRecombinesWithAPassphraseAndGroups() throws {
        let secret = SecureRandomBytes.hex(16)
        let created = try ProcessRunner.run(Self.shamir, ["create", "custom", "-t", "2", "-g", "1", "1", "-g", "2", "3", "-g", "3", "5",
                                                          "-S", secret, "-p", "TREZOR"], environment: ["NO_COLOR": "1"])
        #expect(created.status == 0, "\(created.stderr)")
        let lines = created.stdout.split(separator: "\n").map(String.init).filter { $0.split(separator: " ").count == 20 }
        #expect(lines.count == 9)
        // Group 2 (two of three) and group 3 (three of five), out of order.
        let typed = [lines[8], lines[2], lines[5], lines[1], lines[6]].joined(separator: "\n") + "\n"
        let nobody = User()
        let passphrase = try nobody.directory.write("passphrase", Array("TREZOR\n".utf8))
        #expect(try nobody.ok(["recover-words", "--words-passphrase-file", passphrase], stdin: typed) == secret + "\n")
        // Without the passphrase: another secret, as SLIP-39 means it.
        #expect(try nobody.ok(["recover-words", "--no-words-passphrase"], stdin: typed) != secret + "\n")
        let missing = try nobody.fails(["recover-words", "--no-words-passphrase"], stdin: [lines[8], lines[2], lines[1]].joined(separator: "\n"))
        #expect(missing.contains("1 of 2 groups are complete (group 2: 2 of 2, group 3: 1 of 3)"), "\(missing)")
    }

    @Test func splitLayoutAndPassphraseReachTheReference() throws {
        let (circle, id, key) = try Self.sharedKey()
        let passphrase = try circle.files.write("words-passphrase", Array("correct horse\n".utf8))
        let export = try circle["alice"].vault.run(["secrets", "export-words", id, "--piece", try circle.release(id, from: "bob", to: "alice"),
                                                    "--split", "2-of-3", "--words-passphrase-file", passphrase])
        #expect(export.status == 0, "\(export.stderr)")
        let words = Self.mnemonics(export.stdout)
        #expect(words.values.allSatisfy { $0.count == 3 })
        #expect(try Self.referenceCombines([words["alice"]![2], words["alice"]![0], words["carol"]![1], words["carol"]![2]],
                                           passphrase: "correct horse") == key)
        // One holder's group alone does not: k = 2 groups.
        let request = try JSONSerialization.data(withJSONObject: ["mnemonics": words["alice"]!, "passphrase": "correct horse"])
        #expect(try ProcessRunner.run(Self.python, [Self.peer, "combine"], stdin: Array(request)).status == 1)
    }

    @Test func refusesWhatWordsCannotCarryAndNamesAMistypedWord() throws {
        let circle = try Circle(["alice", "bob"])
        let long = try circle.files.write("long.txt", Array(String(repeating: "x", count: 34).utf8))
        let id = try circle.share(from: "alice", [long, "--to", "bob", "-k", "2", "--type", "note"])
        let tooLong = try circle["alice"].fails(["secrets", "export-words", id, "--piece", try circle.release(id, from: "bob", to: "alice"),
                                                 "--no-words-passphrase"])
        #expect(tooLong.contains("SLIP-39 words carry 16 to 32 bytes, an even number, and this secret has more than 32"), "\(tooLong)")
        // A note that fits is written, with the warning: its words are derived from it, so
        // one mnemonic lets its holder test guesses of a guessable note.
        let short = try circle.files.write("short.txt", Array("my pin is 482913".utf8))
        let noteID = try circle.share(from: "alice", [short, "--to", "bob", "-k", "2", "--type", "note"])
        let note = try circle["alice"].vault.run(["secrets", "export-words", noteID, "--piece", try circle.release(noteID, from: "bob", to: "alice"),
                                                  "--no-words-passphrase"])
        #expect(note.status == 0, "\(note.stderr)")
        #expect(note.stdout.split(separator: "\n").filter { $0.split(separator: " ").count == 20 }.count == 2, "\(note.stdout)")
        #expect(note.stderr.contains("vault: warning: these words are only as hard to guess as the note itself"), "\(note.stderr)")
        #expect(note.stderr.contains("vault: hint: give the words a SLIP-39 passphrase"), "\(note.stderr)")
        let file = try circle.files.write("photo.bin", Array(repeating: 7, count: 32))
        let fileID = try circle.share(from: "alice", [file, "--to", "bob", "-k", "2"])
        let notAKey = try circle["alice"].fails(["secrets", "export-words", fileID, "--no-words-passphrase"])
        #expect(notAKey.contains("is a file; SLIP-39 words carry keys and notes"), "\(notAKey)")

        let shamir = try ProcessRunner.run(Self.shamir, ["create", "2of3"], environment: ["NO_COLOR": "1"])
        var words = shamir.stdout.split(separator: "\n").map(String.init).filter { $0.split(separator: " ").count == 20 }
        var changed = words[0].split(separator: " ").map(String.init)
        let original = changed[6]
        changed[6] = original == "acid" ? "academic" : "acid"
        words[0] = changed.joined(separator: " ")
        let mistyped = try User().fails(["recover-words", "--no-words-passphrase"], stdin: words[0] + "\n" + words[1] + "\n")
        #expect(mistyped.contains("mnemonic 1 fails its checksum: word 7 ('\(changed[6])') is wrong"), "\(mistyped)")
    }
}

/// Random bytes as hex, for a test's secret.
enum SecureRandomBytes {
    static func hex(_ count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }
}
