import ArgumentParser
import Foundation
import VaultCore

struct Id: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show this machine's public key card, with its QR code.",
        discussion: """
            Without options it shows the label, the card, the fingerprint and the QR code. The card \
            text and the QR code carry your label after '#' (vault1…#alice), as a suggestion for \
            the person who imports it.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case text, hex, base64, json
    }

    @OptionGroup var home: HomeOption

    @Option(help: "Print only the card: as text with your label (vault1…#label), hex or base64 of its 65 bytes, or JSON.")
    var format: Format?

    @Flag(help: "Print only the QR code.")
    var qr = false

    @Option(help: ArgumentHelp("Write the QR code as a PNG image.", valueName: "file"))
    var png: String?

    @Option(help: ArgumentHelp("Write the QR code as an SVG image.", valueName: "file"))
    var svg: String?

    @Flag(help: "Without colour, draw dark modules as ink, for dark text on a light terminal.")
    var invert = false

    func validate() throws {
        if qr && format != nil { throw ValidationError("--qr and --format exclude each other") }
    }

    func run() throws {
        let info = try home.openKeystore().identityInfo()
        let offer = CardOffer(card: info.card, suggestedLabel: info.label)
        let code = try QRCode(text: offer.qrPayload)
        if let png { try writeNewFile(png, code.png()) }
        if let svg { try writeNewFile(svg, Array(code.svg().utf8)) }
        let quiet = (png != nil || svg != nil) && format == nil && !qr
        if quiet {
            for file in [png, svg].compactMap({ $0 }) { Terminal.standardError("wrote \(file)") }
            return
        }
        let qrText = code.terminalText(invert: invert, color: Terminal.stdoutWantsColor)
        switch format {
        // The label goes with the card, so that 'vault peer add "$(vault id --format text)"' names the peer.
        case .text?: print(offer.text)
        case .hex?: print(info.card.encoded.hex)
        case .base64?: print(Data(info.card.encoded).base64EncodedString())
        case .json?:
            try printJSON(CardJSON(label: info.label.value, card: info.card.text, fingerprint: info.card.fingerprint,
                                   agreementKey: info.card.agreementKey.hex, signingKey: info.card.signingKey.hex,
                                   protection: info.protection))
        case nil where qr: print(qrText, terminator: "")
        case nil:
            print("label        \(info.label)")
            print("card         \(offer.text)")
            print("fingerprint  \(info.card.fingerprint)")
            print("keys         \(info.protection)")
            print()
            print(qrText, terminator: "")
        }
    }
}

struct CardJSON: Encodable {
    let label: String
    let card: String
    let fingerprint: String
    let agreementKey: String
    let signingKey: String
    /// How the private keys are protected (not part of the card: whoever imports it never
    /// sees this): "none", "passphrase", "tpm" or "tpm+passphrase", and in words. Strings,
    /// as every other value here.
    let protection: String
    let keys: String

    init(label: String, card: String, fingerprint: String, agreementKey: String, signingKey: String, protection: KeyProtection) {
        (self.label, self.card, self.fingerprint, self.agreementKey, self.signingKey) = (label, card, fingerprint, agreementKey, signingKey)
        self.protection = protection.tpm == nil ? (protection.passphrase == nil ? "none" : "passphrase")
            : (protection.passphrase == nil ? "tpm" : "tpm+passphrase")
        keys = protection.description
    }
}
