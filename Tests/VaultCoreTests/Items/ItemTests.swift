import Foundation
import Testing
@testable import VaultCore
import VaultTestSupport

/// Items: the header, the armor, and the keystore's add, open, export and import.
@Suite struct ItemTests {
    let directory = TemporaryDirectory()

    func armor(_ bytes: [UInt8]) throws -> String {
        var out: [UInt8] = []
        let writer = try ArmorWriter { out += $0 }
        // Fed in uneven pieces, as a stream would.
        var offset = 0, step = 1
        while offset < bytes.count {
            let end = min(bytes.count, offset + step)
            try bytes[offset..<end].withUnsafeBytes { try writer.write($0) }
            offset = end
            step = step * 3 % 97 + 1
        }
        try writer.finish()
        return String(decoding: out, as: UTF8.self)
    }

    func dearmor(_ text: String) throws -> [UInt8] {
        var reader = ArmorReader(BytesSource(Array(text.utf8)))
        return try reader.readFully(1 << 20)
    }

    @Test(arguments: [1, 47, 48, 49, 96, 1000, 65_537])
    func armorRoundTrips(length: Int) throws {
        let bytes = SeededRandom(seed: "armor-\(length)").bytes(length)
        let text = try armor(bytes)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.first == "-----BEGIN VAULT ITEM-----" && lines.dropLast().last == "-----END VAULT ITEM-----" && lines.last == "")
        #expect(lines.dropFirst().dropLast(3).allSatisfy { $0.count == 64 })
        #expect(try dearmor(text) == bytes)
        #expect(Data(base64Encoded: lines.dropFirst().dropLast(2).joined()) == Data(bytes))
    }

    @Test func armorIsStrict() throws {
        let text = try armor(SeededRandom(seed: "item-9").bytes(100))  // lines of 64, 64, 12 characters
        let lines = text.split(separator: "\n").map(String.init)
        func refused(_ lines: [String], _ expected: String, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(throws: VaultError.self, sourceLocation: sourceLocation) { try dearmor(lines.joined(separator: "\n") + "\n") }
            do { _ = try dearmor(lines.joined(separator: "\n") + "\n") } catch {
                #expect("\(error)".contains(expected), "\(error)", sourceLocation: sourceLocation)
            }
        }
        #expect(try dearmor(lines.joined(separator: "\r\n") + "\r\n").count == 100)
        refused(Array(lines.dropFirst()), "the first line is not -----BEGIN VAULT ITEM-----")
        refused(Array(lines.dropLast()), "no END line")
        refused(lines + ["trailing"], "text follows the END line")
        var short = lines
        short[1].removeLast(4)
        refused(short, "a line follows a short line")
        var bad = lines
        bad[2] = String(bad[2].dropLast()) + "!"
        refused(bad, "not base64")
        // 100 bytes end in one byte "xx==": its low bits must be zero (libsodium checks).
        var loose = lines
        let last = loose[3]
        let padded = last.dropLast(2).last!
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        let index = alphabet.firstIndex(of: padded)!
        loose[3] = String(last.dropLast(3)) + String(alphabet[index | 1]) + "=="
        refused(loose, "not base64")
    }

    @Test func headerRoundTripsAndRefusesExtraBytes() throws {
        let header = try ItemHeader(keyID: Array(repeating: 7, count: 16), type: .photo, title: "cat", description: "the cat",
                                    random: SeededRandom(seed: "item-1"))
        #expect(try ItemHeader(parsing: header.encoded()) == header)
        #expect(throws: VaultError.self) { try ItemHeader(parsing: header.encoded() + [0]) }
        var unknown = header.encoded()
        unknown[40] = 5  // the type byte: 5 is a key, never an item
        #expect(throws: VaultError.self) { try ItemHeader(parsing: unknown) }
        #expect(throws: VaultError.self) {
            try ItemHeader(keyID: header.keyID, type: .note, title: String(repeating: "t", count: 257), description: "")
        }
    }

    @Test func storesOpensExportsAndImports() throws {
        let keystore = try Keystore.create(home: VaultHome(directory: directory.file("a")), label: Label("a"), passphrase: nil)
        let key = SecureBytes(copying: SeededRandom(seed: "item-3").bytes(32))
        let header = try ItemHeader(keyID: Array(repeating: 1, count: 16), type: .file, title: "t", description: "d")
        let content = SeededRandom(seed: "item-4").bytes(200_000)
        var source = BytesSource(content)
        let item = try keystore.addItem(header, metadata: SecretMetadata(fileName: "x.bin"), content: &source,
                                        itemKey: SharedKey.itemKey(key, headerHash: header.hash))
        #expect(item.size == 200_000 && !item.isNew)
        var opened: [UInt8] = []
        let metadata = try keystore.openItem(item, itemKey: SharedKey.itemKey(key, headerHash: header.hash)) { opened += $0 }
        #expect(opened == content && metadata.fileName == "x.bin")
        // Another key opens nothing.
        let other = SecureBytes(copying: SeededRandom(seed: "item-5").bytes(32))
        #expect(throws: VaultError.itemDoesNotOpen) {
            try keystore.openItem(item, itemKey: SharedKey.itemKey(other, headerHash: header.hash)) { _ in }
        }

        var export: [UInt8] = []
        try keystore.exportItem(item) { export += $0 }
        let target = try Keystore.create(home: VaultHome(directory: directory.file("b")), label: Label("b"), passphrase: nil)
        func importing(_ bytes: [UInt8]) throws -> StoredItem {
            var input = BytesSource(bytes)
            let (parsed, length) = try target.readItemHeader(&input)
            return try target.importItem(parsed, streamLength: length, from: &input, key: SharedKey.itemKey(key, headerHash: parsed.hash))
        }
        // An altered public header changes the item key: the stream no longer opens.
        var retitled = export
        retitled[7 + 16 + 16 + 8 + 1 + 1 + 2] = UInt8(ascii: "T")
        #expect(throws: VaultError.itemDoesNotOpen) { try importing(retitled) }
        #expect(try target.items().isEmpty)
        let imported = try importing(export)
        #expect(imported.isNew && imported.size == 200_000 && imported.header == header)
        #expect(throws: VaultError.duplicateItem(id: header.itemIDHex)) { try importing(export) }
    }

    @Test func passwordLayerInsideTheKey() throws {
        let keystore = try Keystore.create(home: VaultHome(directory: directory.file("p")), label: Label("p"), passphrase: nil)
        let key = SecureBytes(copying: SeededRandom(seed: "item-pw").bytes(32))
        let header = try ItemHeader(keyID: Array(repeating: 2, count: 16), type: .note, passwordProtected: true, title: "", description: "")
        var source = BytesSource(Array("behind a password".utf8))
        let itemKey = SharedKey.itemKey(key, headerHash: header.hash)
        let item = try keystore.addItem(header, metadata: SecretMetadata(), content: &source, itemKey: itemKey,
                                        password: SecureBytes(copying: Array("right".utf8)))
        var opened: [UInt8] = []
        #expect(throws: VaultError.passwordRequired) { try keystore.openItem(item, itemKey: itemKey) { _ in } }
        #expect(throws: VaultError.wrongPassword) {
            try keystore.openItem(item, itemKey: itemKey, password: { SecureBytes(copying: Array("wrong".utf8)) }) { _ in }
        }
        try keystore.openItem(item, itemKey: itemKey, password: { SecureBytes(copying: Array("right".utf8)) }) { opened += $0 }
        #expect(String(decoding: opened, as: UTF8.self) == "behind a password")

        // An import checks the outer layer without the password, and the flag against it.
        var export: [UInt8] = []
        try keystore.exportItem(item) { export += $0 }
        let target = try Keystore.create(home: VaultHome(directory: directory.file("q")), label: Label("q"), passphrase: nil)
        var input = BytesSource(export)
        let (parsed, length) = try target.readItemHeader(&input)
        #expect(parsed.passwordProtected)
        let imported = try target.importItem(parsed, streamLength: length, from: &input, key: itemKey)
        #expect(imported.size == 3 + 17)  // the payload: its 3-byte header and the content
    }
}
