import ArgumentParser
import Foundation
import VaultCore

struct Scan: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Act on a scanned QR code: trust a key card, or import an encrypted item.",
        discussion: """
            With --image, the QR code is read from a PNG, JPEG or PGM image with libzbar. With -, \
            standard input holds the text a phone's scanner produced. A key card is offered as a \
            new peer, as 'vault peer add' does (compare the fingerprint!); an item is imported, as \
            'vault item import' does.

            Asks what those commands ask: whether to trust the key card, or whether to recover \
            an item's locked key from its holders (--yes answers yes).
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("- to read the scanned text from standard input.", valueName: "-"))
    var text: String?

    @Option(help: ArgumentHelp("Read the QR code from this image.", valueName: "file"))
    var image: String?

    @Option(help: ArgumentHelp("For a key card: the peer's local name (default: the label it suggests).", valueName: "name"))
    var label: String?

    @OptionGroup var confirmation: ConfirmOption

    @OptionGroup var recovery: KeyRecoveryOptions

    func validate() throws {
        switch (text, image) {
        case (nil, nil): throw ValidationError("give --image FILE, or - to read the scanned text from standard input")
        case (.some, .some): throw ValidationError("give either --image FILE or -, not both")
        case (let text?, nil) where text != "-": throw ValidationError("the argument is -, for standard input")
        default: break
        }
    }

    func run() async throws {
        let payload: String
        if let image {
            let texts = try QRScanner.scanTexts(imageAt: image)
            guard let found = texts.first(where: { ItemArmor.isQRText($0) || KeyCard.isCardText($0) }) else {
                throw CLIError.invalidInput("the QR code in \(image) is neither a vault key card nor a vault item")
            }
            payload = found
        } else {
            var input = FileSource(standardInput: ())
            let bytes = try input.readFully(ItemArmor.maximumQRText + 2)
            guard let text = String(validating: bytes, as: UTF8.self) else { throw CLIError.invalidInput("standard input is not text") }
            payload = text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        if ItemArmor.isQRText(payload) {
            let keystore = try home.openKeystore()
            let export = try naming(image.map { "the QR code in \($0)" } ?? "standard input") { try ItemArmor.export(fromQRText: payload) }
            var source: any ByteSource = BytesSource(export)
            return try await importItem(from: &source, named: image.map { "the QR code in \($0)" } ?? "standard input",
                                        rereading: { BytesSource(export) }, keystore: keystore, keys: keys, recovery: recovery,
                                        confirmation: confirmation)
        }
        guard KeyCard.isCardText(payload) else {
            throw CLIError.invalidInput("the scanned text is neither a vault key card nor a vault item")
        }
        var arguments = [payload]
        if let home = home.home { arguments += ["--home", home] }
        if let label { arguments += ["--label", label] }
        if confirmation.yes { arguments.append("--yes") }
        let add = try PeerAdd.parse(arguments)
        try add.run()
    }
}
