import ArgumentParser
import Foundation
import VaultCore

struct Scan: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Act on a scanned QR code: trust a key card, import an encrypted item, or recover from printed kits.",
        discussion: """
            With --image, the QR code is read from a PNG, JPEG or PGM image with libzbar. With -, \
            standard input holds the text a phone's scanner produced. A key card is offered as a \
            new peer, as 'vault peer add' does (compare the fingerprint!); an item is imported, as \
            'vault item import' does.

            Recovery kits ('vault secrets kit'): give the pages of k holders' kits, each with \
            --image, in any order (a PDF page as an image: pdftoppm -r 150 -png kit.pdf page). \
            Their codes are checked against the dealer's signature and the secret is rebuilt, \
            to standard output or -o FILE, with no keystore.

            Asks what those commands ask: whether to trust the key card, or whether to recover \
            an item's locked key from its holders (--yes answers yes).
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("- to read the scanned text from standard input.", valueName: "-"))
    var text: String?

    @Option(help: ArgumentHelp("Read the QR code from this image (repeatable, for a recovery kit's pages).", valueName: "file"))
    var image: [String] = []

    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("For recovery kits: write the secret to this file (default: standard output).", valueName: "file"))
    var output: String?

    @Flag(help: "For recovery kits: replace an existing output file.")
    var force = false

    @Option(help: ArgumentHelp("For recovery kits: read the secret's password layer from the first line of this file.", valueName: "file"))
    var passwordFile: String?

    @Option(help: ArgumentHelp("For a key card: the peer's local name (default: the label it suggests).", valueName: "name"))
    var label: String?

    @OptionGroup var confirmation: ConfirmOption

    @OptionGroup var recovery: KeyRecoveryOptions

    func validate() throws {
        switch (text, image.isEmpty) {
        case (nil, true): throw ValidationError("give --image FILE, or - to read the scanned text from standard input")
        case (.some, false): throw ValidationError("give either --image FILE or -, not both")
        case (let text?, true) where text != "-": throw ValidationError("the argument is -, for standard input")
        default: break
        }
    }

    func run() async throws {
        let payload: String
        // A recovery kit's codes, in any of the images: the kit's recovery, with no keystore.
        if !image.isEmpty {
            let scanned = try KitScan.codes(in: image)
            if scanned.contains(where: { $0.codes.contains(where: KitCodes.isKitCode) }) {
                return try KitScan.recover(scanned, output: output, force: force, passwordFile: passwordFile)
            }
            guard image.count == 1 else { throw ValidationError("several images are for a recovery kit's pages; a key card or an item is one image") }
        }
        if output != nil || force || passwordFile != nil {
            throw ValidationError("-o, --force and --password-file are for recovery kits")
        }
        if let image = image.first {
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
            let export = try naming(image.first.map { "the QR code in \($0)" } ?? "standard input") { try ItemArmor.export(fromQRText: payload) }
            var source: any ByteSource = BytesSource(export)
            return try await importItem(from: &source, named: image.first.map { "the QR code in \($0)" } ?? "standard input",
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
