import ArgumentParser
import Foundation
import VaultCore
import VaultNet

struct ItemEdit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "edit",
        abstract: "Replace an item's content, title or description, keeping its id.",
        discussion: """
            Without FILE the content stays and is encrypted again under the new title or \
            description (they are bound to it). On a synced key ('vault key sync') the edit is \
            signed and goes to every holder at the next 'vault sync'; editing a conflict copy \
            makes it the item, in place of the version it lost to.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The item's id.", valueName: "id"))
    var item: String

    @Argument(help: ArgumentHelp("New content: a file, or - for standard input.", valueName: "file"))
    var file: String?

    @Option(help: ArgumentHelp("A new public title.", valueName: "text"))
    var title: String?

    @Option(help: ArgumentHelp("A new public description.", valueName: "text"))
    var description: String?

    @OptionGroup var fields: SecretFieldOptions
    @OptionGroup var passwordLayer: PasswordLayerOptions
    @OptionGroup var recovery: KeyRecoveryOptions
    @OptionGroup var progress: ProgressOption

    func validate() throws {
        guard file != nil || title != nil || description != nil else {
            throw ValidationError("nothing to change: give new content (FILE or -), --title or --description")
        }
        if file == nil && (passwordLayer.password || passwordLayer.passwordFile != nil) {
            throw ValidationError("a password layer goes with new content: give FILE or -")
        }
    }

    func run() async throws {
        let keystore = try home.openKeystore()
        let item = try keystore.item(matching: self.item)
        guard let holding = try keystore.sharedKey(id: item.header.keyID) else { throw VaultError.noShareOfKey(keyID: item.header.keyID.hex) }
        let type = item.header.type
        let fieldsType: SecretType = type == .photo ? .file : SecretType(rawValue: type.rawValue)!
        var content: (metadata: SecretMetadata, source: any ByteSource, password: SecureBytes?)?
        if let file {
            let password = try passwordLayer.read(prompt: "Password for the item: ")
            content = (try fields.metadata(for: fieldsType, file: file), try secretContent(type: fieldsType, file: file), password)
        }
        let header = try item.header.edited(title: title, description: description,
                                            passwordProtected: content.map { $0.password != nil })
        // Both item keys come from one recovery when no agent runs.
        var recovered: SecureBytes?
        let access = await KeyAccess.open(keystore)
        func itemKey(_ header: ItemHeader) async throws -> SecureBytes {
            try await access.itemKey(for: header, holding: holding) {
                if let recovered { return recovered }
                let key = try await recovery.recoverKey(holding, keystore: keystore, keys: keys)
                recovered = key
                return key
            }
        }
        let oldKey = try await itemKey(item.header)
        let newKey = try await itemKey(header)
        let author = try keys.author(keystore, keyID: holding.keyID)
        let edited = try keystore.editItem(item, itemKey: oldKey, newHeader: header, newItemKey: newKey, content: content,
                                           scrypt: try passwordLayer.scrypt.parameters(), author: author)
        print(edited.idHex)
        Terminal.standardError("edited \(type) \(edited.idHex.prefix(16)) under key '\(holding.displayName)' (\(edited.size) bytes)"
            + (author == nil ? "" : SyncNote.published))
    }
}

/// What a command that changed a synced key's items adds to its message.
enum SyncNote {
    static let published = "; it goes to the key's other holders at the next 'vault sync'"
}
