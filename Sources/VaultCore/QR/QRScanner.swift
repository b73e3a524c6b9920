import CZbar

/// Reads QR codes from images with libzbar.
public enum QRScanner {
    /// The payloads of every QR code zbar finds in `image`, as raw bytes.
    ///
    /// zbar's binary mode is on: it otherwise guesses a text encoding (sometimes Shift-JIS)
    /// and rewrites the bytes, which would corrupt a UTF-8 label.
    public static func scan(_ image: GrayImage) -> [[UInt8]] {
        guard let scanner = zbar_image_scanner_create() else { return [] }
        defer { zbar_image_scanner_destroy(scanner) }
        zbar_image_scanner_set_config(scanner, ZBAR_NONE, ZBAR_CFG_ENABLE, 0)
        zbar_image_scanner_set_config(scanner, ZBAR_QRCODE, ZBAR_CFG_ENABLE, 1)
        zbar_image_scanner_set_config(scanner, ZBAR_QRCODE, ZBAR_CFG_BINARY, 1)
        guard let zimage = zbar_image_create() else { return [] }
        defer { zbar_image_destroy(zimage) }
        let y800: UInt = 0x3030_3859  // fourcc "Y800": 8-bit grayscale
        zbar_image_set_format(zimage, y800)
        zbar_image_set_size(zimage, UInt32(image.width), UInt32(image.height))
        return image.pixels.withUnsafeBufferPointer { buffer -> [[UInt8]] in
            zbar_image_set_data(zimage, buffer.baseAddress, UInt(buffer.count), nil)
            guard zbar_scan_image(scanner, zimage) > 0 else { return [] }
            var payloads: [[UInt8]] = []
            var symbol = zbar_image_first_symbol(zimage)
            while let current = symbol {
                if let data = zbar_symbol_get_data(current) {
                    let length = Int(zbar_symbol_get_data_length(current))
                    payloads.append(data.withMemoryRebound(to: UInt8.self, capacity: length) {
                        Array(UnsafeBufferPointer(start: $0, count: length))
                    })
                }
                symbol = zbar_symbol_next(current)
            }
            // zbar must not keep a pointer into the Swift buffer past this closure.
            zbar_image_set_data(zimage, nil, 0, nil)
            return payloads
        }
    }

    /// The payloads of every QR code in `image` or in it at half size, each once: for photos
    /// and scans of paper, where grain or speckle can hide a code from one look that the
    /// image with its noise averaged (``GrayImage/halved()``) shows.
    public static func scanClosely(_ image: GrayImage) -> [[UInt8]] {
        var payloads = scan(image)
        for payload in scan(image.halved()) where !payloads.contains(payload) { payloads.append(payload) }
        return payloads
    }

    /// The payloads of every QR code in the image at `path`, as text (binary ones left out).
    public static func scanTexts(imageAt path: String) throws(VaultError) -> [String] {
        let payloads = scan(try GrayImage(contentsOf: path))
        guard !payloads.isEmpty else { throw .noQRCode(path: path) }
        return payloads.compactMap { String(validating: $0, as: UTF8.self) }
    }

    /// The first key card offer found in the image at `path`.
    public static func scanCard(imageAt path: String) throws(VaultError) -> CardOffer {
        let payloads = scan(try GrayImage(contentsOf: path))
        guard !payloads.isEmpty else { throw .noQRCode(path: path) }
        var firstDefect = CardDefect.wrongPrefix("")
        for (index, payload) in payloads.enumerated() {
            guard let text = String(validating: payload, as: UTF8.self) else { continue }
            do {
                return try CardOffer(text: text)
            } catch {
                if index == 0, case .invalidCard(let defect) = error { firstDefect = defect }
            }
        }
        throw .notAKeyCard(path: path, detail: firstDefect)
    }
}
