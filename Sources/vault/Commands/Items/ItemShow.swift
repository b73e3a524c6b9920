import ArgumentParser
import Foundation
import VaultCore
import VaultNet

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
    @OptionGroup var progress: ProgressOption

    func run() async throws {
        let keystore = try home.openKeystore()
        let item = try keystore.item(matching: self.item)
        let type = item.header.type
        if !type.isText && output == nil {
            throw CLIError.unavailable("item \(item.header.itemIDHex.prefix(16)) is a \(type), not text",
                                       hint: "write it to a file with -o FILE, or to standard output with -o -")
        }
        guard let holding = try keystore.sharedKey(id: item.header.keyID) else { throw VaultError.noShareOfKey(keyID: item.header.keyID.hex) }
        let password = try layerPasswordReadingFirst(file: passwordFile, prompt: "Password for the item: ")
        let access = await KeyAccess.open(keystore)
        let itemKey = try await access.itemKey(for: item.header, holding: holding) {
            try await recovery.recoverKey(holding, keystore: keystore, keys: keys)
        }
        let file = try output.flatMap { $0 == "-" ? nil : try OutputFile(path: $0, replace: force, hiddenUntilCommit: true) }
        let meter = ProgressMeter("decrypting", total: item.size)
        let sink: (UnsafeRawBufferPointer) throws -> Void = { bytes in
            if let file { try file.write(bytes) } else { try writeStandardOutput(bytes) }
        }
        // A photo is shown as a file is: its bytes, and its name on stderr.
        let presenter = PlaintextPresenter(type: SecretType(rawValue: type.rawValue) ?? .file, toStandardOutput: file == nil, sink: sink)
        ProgressLine.show("decrypting", [meter])
        let metadata = try keystore.openItem(item, itemKey: itemKey, password: password, metadataReady: presenter.begin) { bytes in
            try presenter.write(bytes)
            meter.advance(bytes.count)
        }
        try presenter.finish()
        try file?.commit()
        ProgressLine.end()
        for line in PlaintextPresenter.fieldLines(metadata) { Terminal.standardError(line) }
    }
}

struct ItemRemove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm", abstract: "Delete an item, or drop a conflict copy.",
        discussion: """
            On a key that is not synced, the item goes from this machine only. On a synced key \
            ('vault key sync') the delete is signed and goes to every holder at the next 'vault \
            sync'; removing a conflict copy drops that copy everywhere and keeps the item.

            Asks: "Delete item ID (TYPE, SIZE bytes)?" (--yes answers yes).
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The item's id.", valueName: "id"))
    var item: String

    @OptionGroup var confirmation: ConfirmOption

    func run() throws {
        let keystore = try home.openKeystore()
        let item = try keystore.item(matching: self.item)
        let id = String(item.idHex.prefix(16))
        let what = item.isConflict ? "conflict copy" : "item"
        try confirmation.confirm("Delete \(what) \(id) (\(item.header.type), \(item.size) bytes)?", what: "deleting an item")
        let author = try keys.author(keystore, keyID: item.header.keyID)
        try keystore.removeItem(item, author: author)
        Terminal.standardError("deleted \(what) \(id)" + (author == nil ? "" : SyncNote.published))
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

    @Option(help: ArgumentHelp("The other shared key's name or id.", valueName: "name"), completion: Completions.secret)
    var toKey: String

    @OptionGroup var recovery: KeyRecoveryOptions
    @OptionGroup var progress: ProgressOption

    func run() async throws {
        let keystore = try home.openKeystore()
        let item = try keystore.item(matching: self.item)
        guard let from = try keystore.sharedKey(id: item.header.keyID) else { throw VaultError.noShareOfKey(keyID: item.header.keyID.hex) }
        let to = try keystore.sharedKey(matching: toKey)
        guard to.keyID != from.keyID else { throw CLIError.invalidInput("the item is already under key '\(to.displayName)'") }
        let header = item.header.copy(to: to.keyID)
        let access = await KeyAccess.open(keystore)
        let oldKey = try await access.itemKey(for: item.header, holding: from) {
            try await recovery.recoverKey(from, keystore: keystore, keys: keys)
        }
        let newKey = try await access.itemKey(for: header, holding: to) {
            try await recovery.recoverKey(to, keystore: keystore, keys: keys)
        }
        let copy = try keystore.copyItem(item, itemKey: oldKey, to: header, newItemKey: newKey, author: try keys.author(keystore, keyID: to.keyID))
        print(copy.header.itemIDHex)
        Terminal.standardError("copied item \(item.header.itemIDHex.prefix(16)) to key '\(to.displayName)' as \(copy.header.itemIDHex.prefix(16))")
    }
}
