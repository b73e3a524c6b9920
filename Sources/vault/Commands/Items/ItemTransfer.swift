import ArgumentParser
import Foundation
import VaultCore
import VaultNet

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

            Asks, when the key is locked: "Key 'NAME' is needed to verify this item. Recover it \
            from its holders for this import?" (with 'vault serve' running: "Key 'NAME' is \
            locked. Recover it from its holders and unlock it for 15 minutes?"); --yes answers yes.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The exported item, or - for standard input.", valueName: "file"))
    var file: String

    @OptionGroup var confirmation: ConfirmOption

    @OptionGroup var recovery: KeyRecoveryOptions

    func run() async throws {
        let keystore = try home.openKeystore()
        let name = file == "-" ? "standard input" : file
        let input: any ByteSource = file == "-" ? FileSource(standardInput: ()) : try FileSource(path: file)
        var source = try naming(name) { try ItemInput.open(input) }
        let file = file
        try await importItem(from: &source, named: name, rereading: file == "-" ? nil : { try FileSource(path: file) }, keystore: keystore,
                             keys: keys, recovery: recovery, confirmation: confirmation)
    }
}

/// Imports one item from `source` (binary export, already unwrapped from armor or QR text),
/// whose refusals name it as `name`. Its key comes from the agent or, after asking (unless
/// `--yes`), by recovery, which also unlocks it in a running agent for 15 minutes.
/// `rereading` gives the input again from its start, where it can be read twice (a file,
/// not standard input): when the key must be recovered, it is read through first, so that
/// one cut short is refused before anyone is asked for the key.
func importItem(from source: inout any ByteSource, named name: String, rereading: (() throws -> any ByteSource)?, keystore: Keystore,
                keys: PassphraseOption, recovery: KeyRecoveryOptions, confirmation: ConfirmOption) async throws {
    let (header, streamLength) = try naming(name) { try keystore.readItemHeader(&source) }
    guard let holding = try keystore.sharedKey(id: header.keyID) else {
        throw VaultError.noShareOfKey(keyID: header.keyID.hex).about(file: name)
    }
    let access = await KeyAccess.open(keystore)
    let (itemKey, recovered) = try await access.itemKeyUnlocking(for: header, holding: holding, unlockSeconds: 15 * 60) {
        // The key must be recovered: the input is read through first (without the key it
        // can show only that its stream is whole, not that it is authentic).
        if let rereading { try naming(name) { try ItemInput.checkWhole(rereading()) } }
        let question = access.agent == nil
            ? "Key '\(holding.displayName)' is needed to verify this item. Recover it from its holders for this import?"
            : "Key '\(holding.displayName)' is locked. Recover it from its holders and unlock it for 15 minutes?"
        try confirmation.confirm(question, details: ["item  \(header.type) \(header.itemIDHex.prefix(16))  \(TerminalText.escaped(header.title))"],
                                 what: "recovering a key")
        return try await recovery.recoverKey(holding, keystore: keystore, keys: keys)
    }
    if recovered && access.agent != nil { Terminal.standardError("unlocked key '\(holding.displayName)' for 15 minutes") }
    let author = try keys.author(keystore, keyID: header.keyID)
    let item = try naming(name) { try keystore.importItem(header, streamLength: streamLength, from: &source, key: itemKey, author: author) }
    print(item.header.itemIDHex)
    Terminal.standardError("imported \(header.type) \(header.itemIDHex.prefix(16)) under key '\(holding.displayName)' (\(item.size) bytes), marked new")
}
