import ArgumentParser
import Foundation
import VaultCore
import VaultNet

struct ItemCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "item",
        abstract: "Encrypt items with a shared key, and move them between its holders.",
        discussion: """
            An item is stored in full, encrypted with a shared key, and opens for every holder of \
            that key. Item commands get the key from the agent of 'vault serve' once it is unlocked \
            ('vault unlock NAME'); without a running serve they recover it from nearby holders for \
            that one command.
            """,
        subcommands: [ItemAdd.self, ItemList.self, ItemShow.self, ItemRemove.self, ItemCopy.self, ItemExportCommand.self,
                      ItemImport.self])
}

struct ItemAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Encrypt an item with a shared key and store it.",
        discussion: "The title and description are public: anyone who sees the item, or its export, can read them.")

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Option(help: ArgumentHelp("The shared key's name or id.", valueName: "name"))
    var key: String

    @Option(help: ArgumentHelp("note, file, password, contact or photo (default: file for a FILE, else note).", valueName: "type"))
    var type: String?

    @Argument(help: ArgumentHelp("The file to encrypt, or - for standard input (default for notes).", valueName: "file"))
    var file: String?

    @Option(help: ArgumentHelp("A public title.", valueName: "text"))
    var title: String = ""

    @Option(help: ArgumentHelp("A public description.", valueName: "text"))
    var description: String = ""

    @OptionGroup var fields: SecretFieldOptions

    @OptionGroup var passwordLayer: PasswordLayerOptions
    @OptionGroup var recovery: KeyRecoveryOptions

    func run() async throws {
        let itemType = try resolvedType()
        let keystore = try home.openKeystore()
        let holding = try keystore.sharedKey(matching: key)
        // A photo carries the same fields as a file: its name.
        let fieldsType: SecretType = itemType == .photo ? .file : SecretType(rawValue: itemType.rawValue)!
        let metadata = try fields.metadata(for: fieldsType, file: file)
        let layerPassword = try passwordLayer.read(prompt: "Password for the item: ")
        let header = try ItemHeader(keyID: holding.keyID, type: itemType, passwordProtected: layerPassword != nil, title: title,
                                    description: description)
        let access = await KeyAccess.open(keystore)
        let itemKey = try await access.itemKey(for: header, holding: holding, unlock: { try keys.unlock(keystore) }, options: recovery)
        var source = try secretContent(type: fieldsType, file: file)
        let item = try keystore.addItem(header, metadata: metadata, content: &source, itemKey: itemKey, password: layerPassword,
                                        scrypt: try passwordLayer.scrypt.parameters())
        print(item.header.itemIDHex)
        Terminal.standardError("added \(itemType) \(item.header.itemIDHex.prefix(16)) under key '\(holding.displayName)' (\(item.size) bytes)")
    }

    private func resolvedType() throws -> ItemType {
        guard let type else { return file != nil && file != "-" ? .file : .note }
        guard let resolved = ItemType(name: type) else { throw ValidationError("--type takes note, file, password, contact or photo") }
        if (resolved == .file || resolved == .photo) && (file == nil || file == "-") { throw ValidationError("--type \(resolved) needs a FILE") }
        return resolved
    }
}

struct ItemList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List items: id, type, title, description, size, date.")

    @OptionGroup var home: HomeOption

    @Option(help: ArgumentHelp("Only the items of this shared key.", valueName: "name"))
    var key: String?

    @Flag(help: "Print JSON.")
    var json = false

    struct Entry: Encodable {
        let id: String
        let keyID: String
        let key: String?
        let type: String
        let title: String
        let description: String
        let size: UInt64
        let created: Date
        let new: Bool
        let password: Bool
    }

    func run() throws {
        let keystore = try home.openKeystore()
        let keyID = try key.map { try keystore.sharedKey(matching: $0).keyID }
        let names = Dictionary(try keystore.sharedKeys().map { ($0.keyID, $0.displayName) }, uniquingKeysWith: { a, _ in a })
        let entries = try keystore.items(keyID: keyID).map { item in
            let h = item.header
            return Entry(id: h.itemIDHex, keyID: h.keyID.hex, key: names[h.keyID], type: h.type.description, title: h.title,
                         description: h.description, size: item.size, created: Date(timeIntervalSince1970: TimeInterval(h.createdAt)),
                         new: item.isNew, password: h.passwordProtected)
        }
        if json { return try printJSON(entries) }
        guard !entries.isEmpty else { return Terminal.standardError("no items; 'vault item add --key NAME' adds one") }
        let day = DateFormatter()
        day.dateFormat = "yyyy-MM-dd"
        for e in entries {
            let text = [e.title.isEmpty ? "-" : e.title, e.description].filter { !$0.isEmpty }.joined(separator: "  ")
            print("\(e.id.prefix(16))  \(e.type)\(e.password ? " (password)" : "")  \(text)  \(e.size) B  \(day.string(from: e.created))  key \(e.key ?? String(e.keyID.prefix(16)))"
                + (e.new ? "  new" : ""))
        }
    }
}

struct ItemShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Decrypt an item: text to standard output, anything else to -o FILE (or -o - to force standard output).")

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The item's id (at least 4 hex digits).", valueName: "id"))
    var item: String

    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("Write the content to this file; - for standard output.", valueName: "file"))
    var output: String?

    @Flag(help: "Replace an existing output file.")
    var force = false

    @Option(help: ArgumentHelp("The item's password layer, if it has one: read from the first line of this file.", valueName: "file"))
    var passwordFile: String?

    @OptionGroup var recovery: KeyRecoveryOptions

    func run() async throws {
        let keystore = try home.openKeystore()
        let item = try keystore.item(matching: self.item)
        let type = item.header.type
        if !type.isText && output == nil {
            throw CLIError.unavailable("item \(item.header.itemIDHex.prefix(16)) is a \(type), not text",
                                       hint: "write it to a file with -o FILE, or to standard output with -o -")
        }
        guard let holding = try keystore.sharedKey(id: item.header.keyID) else { throw VaultError.noShareOfKey(keyID: item.header.keyID.hex) }
        let access = await KeyAccess.open(keystore)
        let itemKey = try await access.itemKey(for: item.header, holding: holding, unlock: { try keys.unlock(keystore) }, options: recovery)
        let file = try output.flatMap { $0 == "-" ? nil : try OutputFile(path: $0, replace: force, hiddenUntilCommit: true) }
        let sink: (UnsafeRawBufferPointer) throws -> Void = { bytes in
            if let file { try file.write(bytes) } else { try writeStandardOutput(bytes) }
        }
        let password = layerPassword(file: passwordFile, prompt: "Password for the item: ")
        let metadata = try keystore.openItem(item, itemKey: itemKey, password: password, metadataReady: { metadata in
            if type == .contact { try Array(contactText(metadata).utf8).withUnsafeBytes(sink) }
        }, content: sink)
        if type == .password && file == nil { try Array("\n".utf8).withUnsafeBytes(sink) }
        try file?.commit()
        if let name = metadata.fileName { Terminal.standardError("file name: \(name)") }
        if let username = metadata.username { Terminal.standardError("username: \(username)") }
        if let url = metadata.url { Terminal.standardError("url: \(url)") }
    }
}

struct ItemRemove: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rm", abstract: "Delete an item from this machine.")

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The item's id.", valueName: "id"))
    var item: String

    @Flag(help: "Delete without asking (for scripts).")
    var yes = false

    func run() throws {
        let keystore = try home.openKeystore()
        let item = try keystore.item(matching: self.item)
        let id = String(item.header.itemIDHex.prefix(16))
        if !yes {
            guard try Terminal.confirm("Delete item \(id) (\(item.header.type), \(item.size) bytes)?", what: "deleting an item") else {
                throw CLIError.cancelled
            }
        }
        try keystore.removeItem(item)
        Terminal.standardError("deleted item \(id)")
    }
}

struct ItemCopy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy",
        abstract: "Re-encrypt an item under another shared key, as a new item for that key's holders.")

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The item's id.", valueName: "id"))
    var item: String

    @Option(help: ArgumentHelp("The other shared key's name or id.", valueName: "name"))
    var toKey: String

    @OptionGroup var recovery: KeyRecoveryOptions

    func run() async throws {
        let keystore = try home.openKeystore()
        let item = try keystore.item(matching: self.item)
        guard let from = try keystore.sharedKey(id: item.header.keyID) else { throw VaultError.noShareOfKey(keyID: item.header.keyID.hex) }
        let to = try keystore.sharedKey(matching: toKey)
        guard to.keyID != from.keyID else { throw CLIError.invalidInput("the item is already under key '\(to.displayName)'") }
        let header = item.header.copy(to: to.keyID)
        let access = await KeyAccess.open(keystore)
        let unlock = { try keys.unlock(keystore) }
        let oldKey = try await access.itemKey(for: item.header, holding: from, unlock: unlock, options: recovery)
        let newKey = try await access.itemKey(for: header, holding: to, unlock: unlock, options: recovery)
        let copy = try keystore.copyItem(item, itemKey: oldKey, to: header, newItemKey: newKey)
        print(copy.header.itemIDHex)
        Terminal.standardError("copied item \(item.header.itemIDHex.prefix(16)) to key '\(to.displayName)' as \(copy.header.itemIDHex.prefix(16))")
    }
}

struct ItemExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write an item as it is stored, encrypted, to send by any channel.",
        discussion: """
            The binary export is self-describing (Docs/FORMAT.md §13); --armor makes text that \
            survives mail and chat; --qr shows a small item (at most \(ItemExportCommand.qrLimit) bytes of \
            content) as a QR code, or writes it to --png FILE. Needs no key: the item stays encrypted.
            """)

    static let qrLimit = 256

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The item's id.", valueName: "id"))
    var item: String

    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("Write to this file (default: standard output).", valueName: "file"))
    var output: String?

    @Flag(help: "Armored text: -----BEGIN VAULT ITEM----- and base64 at 64 columns.")
    var armor = false

    @Flag(help: "A QR code on the terminal, for small items.")
    var qr = false

    @Option(help: ArgumentHelp("Write the QR code as a PNG image.", valueName: "file"))
    var png: String?

    @Flag(help: "Replace an existing output file.")
    var force = false

    @Flag(help: "Without colour, draw dark modules as ink, for dark text on a light terminal.")
    var invert = false

    func validate() throws {
        if armor && (qr || png != nil) { throw ValidationError("--armor and --qr exclude each other") }
        if output != nil && (qr || png != nil) { throw ValidationError("--qr goes to the terminal or to --png, not to --output") }
    }

    func run() throws {
        let keystore = try home.openKeystore()
        let item = try keystore.item(matching: self.item)
        if qr || png != nil {
            guard item.size <= UInt64(Self.qrLimit) else {
                throw CLIError.unavailable("item \(item.header.itemIDHex.prefix(16)) has \(item.size) bytes; a QR code carries at most \(Self.qrLimit)",
                                           hint: "send it as a file with 'vault item export \(item.header.itemIDHex.prefix(8)) -o FILE' (or --armor)")
            }
            var export: [UInt8] = []
            try keystore.exportItem(item) { export += $0 }
            let code = try QRCode(text: ItemArmor.qrText(export))
            if let png {
                try writeNewFile(png, code.png())
                Terminal.standardError("wrote \(png)")
            }
            if qr { print(code.terminalText(invert: invert, color: Terminal.stdoutWantsColor), terminator: "") }
            return
        }
        let file = try output.map { try OutputFile(path: $0, replace: force, mode: 0o644, hiddenUntilCommit: true) }
        let sink: (UnsafeRawBufferPointer) throws -> Void = { bytes in
            if let file { try file.write(bytes) } else { try writeStandardOutput(bytes) }
        }
        if armor {
            let writer = try ArmorWriter(emit: sink)
            try keystore.exportItem(item, to: writer.write)
            try writer.finish()
        } else {
            if file == nil && isatty(STDOUT_FILENO) == 1 {
                throw CLIError.unavailable("the binary export would go to the terminal", hint: "use -o FILE, --armor, or a pipe")
            }
            try keystore.exportItem(item, to: sink)
        }
        try file?.commit()
        if let output { Terminal.standardError("exported item \(item.header.itemIDHex.prefix(16)) to \(output)") }
    }
}

struct ItemImport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Store an item someone exported: binary, armored, or the text of its QR code.",
        discussion: """
            The item names its key by id. It is decrypted and verified in full before it is \
            stored, marked new. When the key is locked you are asked before it is recovered from \
            its holders (and, with 'vault serve' running, unlocked in its agent).
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The exported item, or - for standard input.", valueName: "file"))
    var file: String

    @Flag(help: "Recover a locked key without asking (for scripts).")
    var yes = false

    @OptionGroup var recovery: KeyRecoveryOptions

    func run() async throws {
        let keystore = try home.openKeystore()
        let input: any ByteSource = file == "-" ? FileSource(standardInput: ()) : try FileSource(path: file)
        var source = try ItemInput.open(input)
        try await importItem(from: &source, keystore: keystore, keys: keys, recovery: recovery, yes: yes)
    }
}

/// Imports one item from `source` (binary export, already unwrapped from armor or QR text),
/// getting its key from the agent or, after asking, by recovery.
func importItem(from source: inout any ByteSource, keystore: Keystore, keys: PassphraseOption, recovery: KeyRecoveryOptions,
                yes: Bool) async throws {
    let (header, streamLength) = try keystore.readItemHeader(&source)
    guard let holding = try keystore.sharedKey(id: header.keyID) else { throw VaultError.noShareOfKey(keyID: header.keyID.hex) }
    let access = await KeyAccess.open(keystore)
    var itemKey = try await access.agent?.itemKey(keyID: holding.keyID, headerHash: SharedKey.headerHash(header))
    if itemKey == nil {
        if !yes {
            let question = access.agent == nil
                ? "Key '\(holding.displayName)' is needed to verify this item. Recover it from its holders for this import?"
                : "Key '\(holding.displayName)' is locked. Recover it from its holders and unlock it for 15 minutes?"
            guard try Terminal.confirm(question, details: ["item  \(header.type) \(header.itemIDHex.prefix(16))  \(header.title)"],
                                       what: "recovering a key") else { throw CLIError.cancelled }
        }
        let identity = try keys.unlock(keystore)
        let key = try await recoverSharedKey(holding, keystore: keystore, identity: identity, options: recovery)
        if let agent = access.agent {
            try await agent.unlock(keyID: holding.keyID, key: key, seconds: 15 * 60)
            Terminal.standardError("unlocked key '\(holding.displayName)' for 15 minutes")
        }
        itemKey = SharedKey.itemKey(key, headerHash: SharedKey.headerHash(header))
    }
    let item = try keystore.importItem(header, streamLength: streamLength, from: &source, key: itemKey!)
    print(item.header.itemIDHex)
    Terminal.standardError("imported \(header.type) \(header.itemIDHex.prefix(16)) under key '\(holding.displayName)' (\(item.size) bytes), marked new")
}

/// An item given in any of its forms, as the binary export.
enum ItemInput {
    /// Sniffs `source`: armor is unwrapped as it streams, QR text decoded, binary passed on.
    static func open(_ source: any ByteSource) throws -> any ByteSource {
        let (head, whole) = try PrefixedSource.peek(source, count: 32)
        if ItemArmor.isArmor(head) { return ArmorReader(whole) }
        if let text = String(validating: head, as: UTF8.self), ItemArmor.isQRText(text) {
            var rest = whole
            let all = try rest.readFully(ItemArmor.maximumQRText + 2)
            return BytesSource(try ItemArmor.export(fromQRText: String(decoding: all, as: UTF8.self)))
        }
        return whole
    }
}
