import Foundation
import Testing
@testable import VaultCore
import VaultTestSupport

@Suite struct QRCodeTests {
    static let payload = KeyCardTests.vectorText.uppercased() + "#Zoë's laptop"

    @Test func pngRoundTripsThroughLibzbar() throws {
        let code = try QRCode(text: Self.payload)
        let directory = TemporaryDirectory()
        let image = try GrayImage(contentsOf: directory.write("code.png", code.png()))
        #expect(QRScanner.scan(image) == [Array(Self.payload.utf8)])
    }

    @Test func usesCompactModesForTheCard() throws {
        // The uppercase card goes in alphanumeric mode: a smaller symbol than the lowercase
        // text, which QR can only carry as bytes.
        let upper = try QRCode(text: KeyCardTests.vectorText.uppercased())
        let lower = try QRCode(text: KeyCardTests.vectorText)
        #expect(upper.size < lower.size)
    }

    /// The terminal rendering, turned back into a bitmap, must scan: in both polarities,
    /// with and without forced colours.
    @Test(arguments: [false, true])
    func terminalTextScans(invert: Bool) throws {
        let code = try QRCode(text: Self.payload)
        for color in [true, false] {
            let text = code.terminalText(invert: invert, color: color)
            #expect(text.contains("\u{1B}[") == color)
            let image = try #require(TerminalQR.bitmap(from: text, invert: invert))
            #expect(QRScanner.scan(image) == [Array(Self.payload.utf8)])
        }
    }

    @Test func svgDrawsEveryDarkModule() throws {
        let code = try QRCode(text: "HELLO")
        let svg = code.svg()
        #expect(svg.hasPrefix("<?xml") && svg.contains("viewBox=\"0 0 \(code.size + 8) \(code.size + 8)\""))
        var dark = 0
        for y in 0..<code.size { for x in 0..<code.size where code.isDark(x: x, y: y) { dark += 1 } }
        let widths = svg.matches(of: /h(\d+)v1/).map { Int($0.1)! }
        #expect(widths.reduce(0, +) == dark)
    }

    @Test func refusesOversizedPayloads() {
        #expect(throws: VaultError.qrPayloadTooLarge(5000)) { try QRCode(text: String(repeating: "a", count: 5000)) }
    }

    @Test func scanReportsMissingCodesAndForeignCodes() throws {
        let directory = TemporaryDirectory()
        let blank = try GrayImage(width: 64, height: 64, pixels: [UInt8](repeating: 255, count: 4096)).png()
        let blankPath = try directory.write("blank.png", blank)
        #expect(throws: VaultError.noQRCode(path: blankPath)) { try QRScanner.scanCard(imageAt: blankPath) }
        let foreign = try directory.write("url.png", QRCode(text: "https://example.org/").png())
        #expect(throws: VaultError.notAKeyCard(path: foreign, detail: .missingSeparator)) {
            try QRScanner.scanCard(imageAt: foreign)
        }
        let card = try directory.write("card.png", QRCode(text: Self.payload).png())
        #expect(try QRScanner.scanCard(imageAt: card).suggestedLabel?.value == "Zoë's laptop")
    }
}

