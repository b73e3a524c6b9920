import Foundation
import Testing
@testable import VaultCore
import VaultTestSupport

@Suite struct GrayImageTests {
    let directory = TemporaryDirectory()

    func pgm(_ header: String, _ pixels: [UInt8]) -> [UInt8] { Array(header.utf8) + pixels }

    @Test func parsesBinaryPGM() throws {
        let image = try GrayImage.parsePGM("x", pgm("P5\n# comment\n2 2\n255\n", [0, 255, 128, 7]))
        #expect(image.width == 2 && image.height == 2 && image.pixels == [0, 255, 128, 7])
        let wide = try GrayImage.parsePGM("x", pgm("P5 1 1 65535\n", [0xFF, 0xFF]))
        #expect(wide.pixels == [255])
    }

    @Test(arguments: ["P5\n2 2\n255\n", "P5\n2 2\n255", "P5\n0 2\n255\n", "P5\n2 2\n0\n", "P5\n2\n", "P5\n2 2 255x"])
    func refusesMalformedPGM(header: String) {
        #expect(throws: VaultError.self) { try GrayImage.parsePGM("x", pgm(header, [1, 2, 3])) }
    }

    @Test func refusesTrailingPGMBytes() {
        #expect(throws: VaultError.self) { try GrayImage.parsePGM("x", pgm("P5 1 1 255\n", [1, 2])) }
    }

    @Test func pngRoundTripsAndTruncatedPNGIsRefused() throws {
        let pixels = (0..<100).map { UInt8($0 * 2) }
        let png = try GrayImage(width: 10, height: 10, pixels: pixels).png()
        #expect(try GrayImage(contentsOf: directory.write("a.png", png)).pixels == pixels)
        let truncated = try directory.write("t.png", png.prefix(png.count / 2))
        #expect(throws: VaultError.unreadableImage(path: truncated, reason: "the image data is damaged or truncated")) {
            try GrayImage(contentsOf: truncated)
        }
    }

    /// JPEG files come from cjpeg (libjpeg-turbo-progs), an encoder independent of ours.
    @Test func decodesJPEGAndScansAPhotoOfACode() throws {
        let code = try QRCode(text: QRCodeTests.payload)
        let (side, pixels) = code.bitmap(scale: 6)
        let pgmPath = try directory.write("code.pgm", pgm("P5\n\(side) \(side)\n255\n", pixels))
        let jpegPath = directory.file("code.jpg")
        let result = try ProcessRunner.run("/usr/bin/cjpeg", ["-quality", "60", "-grayscale", "-outfile", jpegPath, pgmPath])
        #expect(result.status == 0, "\(result.stderr)")
        let image = try GrayImage(contentsOf: jpegPath)
        #expect(image.width == side)
        #expect(QRScanner.scan(image) == [Array(QRCodeTests.payload.utf8)])
        let truncated = try directory.write("t.jpg", FileManager.default.contents(atPath: jpegPath)!.prefix(200))
        #expect(throws: VaultError.self) { try GrayImage(contentsOf: truncated) }
    }

    @Test func refusesUnknownEmptyAndMissingFiles() throws {
        let text = try directory.write("a.txt", Array("hello".utf8))
        #expect(throws: VaultError.unreadableImage(path: text, reason: "not a PNG, JPEG or binary PGM file")) {
            try GrayImage(contentsOf: text)
        }
        let empty = try directory.write("e.png", [UInt8]())
        #expect(throws: VaultError.unreadableImage(path: empty, reason: "the file is empty")) { try GrayImage(contentsOf: empty) }
        #expect(throws: VaultError.unreadableImage(path: "/nonexistent.png", reason: "No such file or directory")) {
            try GrayImage(contentsOf: "/nonexistent.png")
        }
    }

    /// A photo's grain, here noise of ±60 on a grey page (seeded: the same image every run),
    /// hides a code from zbar's one look; at half size the noise averages out and the code
    /// reads. Kits are read this way (`vault scan`).
    @Test func aGrainyCodeReadsAtHalfSize() throws {
        let text = String(repeating: "VAULTKIT1QQQ", count: 50)
        let (side, pixels) = try QRCode(text: text).bitmap(scale: 4)
        let noise = SeededRandom(seed: "grain").bytes(pixels.count)
        let grainy = zip(pixels, noise).map { pixel, byte -> UInt8 in
            let grey: Int = 40 + Int(pixel) * 170 / 255
            let grain: Int = Int(byte) * 121 / 256 - 60
            return UInt8(max(0, min(255, grey + grain)))
        }
        let image = GrayImage(width: side, height: side, pixels: grainy)
        #expect(QRScanner.scan(image).isEmpty, "the grain no longer hides the code: the test shows nothing")
        #expect(QRScanner.scanClosely(image) == [Array(text.utf8)])
        let halved = image.halved()
        #expect(halved.width == side / 2 && halved.height == side / 2)
        #expect(GrayImage(width: 3, height: 2, pixels: [0, 4, 9, 8, 12, 200]).halved().pixels == [6])
    }
}

