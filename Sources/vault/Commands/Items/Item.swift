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
        subcommands: [ItemAdd.self, ItemList.self, ItemShow.self, ItemEdit.self, ItemRemove.self, ItemCopy.self, ItemHistory.self,
                      ItemExportCommand.self, ItemImport.self])
}

struct ItemAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Encrypt an item with a shared key and store it.",
        discussion: "The title and description are public: anyone who sees the item, or its export, can read them.")

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Option(help: ArgumentHelp("The shared key's name or id.", valueName: "name"), completion: Completions.secret)
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
    @OptionGroup var progress: ProgressOption

    func run() async throws {
        let itemType = try resolvedType()
        let keystore = try home.openKeystore()
        let holding = try keystore.sharedKey(matching: key)
        // A photo carries the same fields as a file: its name.
        let fieldsType: SecretType = itemType == .photo ? .file : SecretType(rawValue: itemType.rawValue)!
        let metadata = try fields.metadata(for: fieldsType, file: file)
        let input = try SecretInput(type: fieldsType, file: file, passwordLayer: passwordLayer)
        let layerPassword = try input.password(prompt: "Password for the item: ")
        let header = try ItemHeader(keyID: holding.keyID, type: itemType, passwordProtected: layerPassword != nil, title: title,
                                    description: description)
        let access = await KeyAccess.open(keystore)
        let itemKey = try await access.itemKey(for: header, holding: holding) {
            try await recovery.recoverKey(holding, keystore: keystore, keys: keys)
        }
        let content = try input.content()
        let meter = ProgressMeter("encrypting", total: (content as? FileSource)?.size ?? 0)
        var source = MeteredSource(content, meter: meter)
        ProgressLine.show("encrypting", [meter])
        let author = try keys.author(keystore, keyID: holding.keyID)
        let item = try keystore.addItem(header, metadata: metadata, content: &source, itemKey: itemKey, password: layerPassword,
                                        scrypt: try passwordLayer.scrypt.parameters(), author: author)
        ProgressLine.end()
        print(item.header.itemIDHex)
        Terminal.standardError("added \(itemType) \(item.header.itemIDHex.prefix(16)) under key '\(holding.displayName)' (\(item.size) bytes)"
            + (author == nil ? "" : SyncNote.published))
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

    @Option(help: ArgumentHelp("Only the items of this shared key.", valueName: "name"), completion: Completions.secret)
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
        /// Under a synced key: the version (`COUNTER.AUTHOR`) and its author's name.
        let version: String?
        let author: String?
        /// A concurrent edit kept beside the item (`vault item rm` drops it, `vault item
        /// edit` makes it the item).
        let conflict: Bool
        let unopened: Bool
    }

    func run() throws {
        let keystore = try home.openKeystore()
        let keyID = try key.map { try keystore.sharedKey(matching: $0).keyID }
        let names = Dictionary(try keystore.sharedKeys().map { ($0.keyID, $0.displayName) }, uniquingKeysWith: { a, _ in a })
        let authors = try AuthorNames(keystore)
        let entries = try keystore.items(keyID: keyID).map { item in
            let h = item.header
            return Entry(id: item.idHex, keyID: h.keyID.hex, key: names[h.keyID], type: h.type.description, title: h.title,
                         description: h.description, size: item.size, created: Date(timeIntervalSince1970: TimeInterval(h.createdAt)),
                         new: item.isNew, password: h.passwordProtected, version: item.version?.description,
                         author: item.version.map { authors.name($0.author) }, conflict: item.isConflict, unopened: item.unopened)
        }
        if json { return try printJSON(entries) }
        guard !entries.isEmpty else { return Terminal.standardError("no items; 'vault item add --key NAME' adds one") }
        let day = DateFormatter()
        day.dateFormat = "yyyy-MM-dd"
        for e in entries {
            let text = [e.title.isEmpty ? "-" : e.title, e.description].filter { !$0.isEmpty }.map { TerminalText.escaped($0) }
                .joined(separator: "  ")
            let synced = e.version.map { "  v\($0) by \(e.author ?? "?")" } ?? ""
            print("\(e.id.prefix(16))  \(e.type)\(e.password ? " (password)" : "")  \(text)  \(e.size) B  \(day.string(from: e.created))  key \(e.key ?? String(e.keyID.prefix(16)))"
                + synced + (e.conflict ? "  CONFLICT" : "") + (e.unopened ? "  unopened" : "") + (e.new ? "  new" : ""))
        }
    }
}
