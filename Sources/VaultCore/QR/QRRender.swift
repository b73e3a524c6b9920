/// Ways to show a ``QRCode``: terminal text, a grayscale bitmap (for PNG) and SVG.
/// Each draws the 4-module quiet zone scanners need.
extension QRCode {
    /// The QR code as terminal text: two module rows per line, with Unicode half blocks.
    ///
    /// A scanner needs dark modules on a light ground. With `color`, the colours are forced
    /// (as qrencode's ANSIUTF8 mode does), so the code scans on dark and light terminals
    /// alike. Without colour the terminal's own colours are used: the default draws light
    /// modules as ink, right for light text on a dark background; `invert` draws dark
    /// modules as ink, for dark text on a light background.
    public func terminalText(invert: Bool = false, color: Bool = true) -> String {
        let quiet = Limits.qrQuietZone
        let side = size + 2 * quiet
        let (start, reset) = invert ? ("\u{1B}[30;107m", "\u{1B}[0m") : ("\u{1B}[97;40m", "\u{1B}[0m")
        var out = ""
        for pair in stride(from: 0, to: side, by: 2) {
            if color { out += start }
            for column in 0..<side {
                let top = isInk(x: column - quiet, y: pair - quiet, invert: invert)
                // An odd last row is padded with quiet zone, which is light.
                let bottom = pair + 1 < side ? isInk(x: column - quiet, y: pair + 1 - quiet, invert: invert) : !invert
                let cell: String = switch (top, bottom) {
                case (true, true): "█"
                case (true, false): "▀"
                case (false, true): "▄"
                case (false, false): " "
                }
                out += cell
            }
            if color { out += reset }
            out += "\n"
        }
        return out
    }

    private func isInk(x: Int, y: Int, invert: Bool) -> Bool {
        isDark(x: x, y: y) == invert
    }

    /// An 8-bit grayscale bitmap, `scale` pixels per module, black on white.
    public func bitmap(scale: Int = 8) -> (width: Int, pixels: [UInt8]) {
        let side = (size + 2 * Limits.qrQuietZone) * scale
        var pixels = [UInt8](repeating: 255, count: side * side)
        for y in 0..<size {
            for x in 0..<size where modules[y * size + x] {
                let left = (x + Limits.qrQuietZone) * scale, topRow = (y + Limits.qrQuietZone) * scale
                for row in topRow..<topRow + scale {
                    pixels.replaceSubrange(row * side + left..<row * side + left + scale,
                                           with: repeatElement(0, count: scale))
                }
            }
        }
        return (side, pixels)
    }

    /// A PNG file's bytes, `scale` pixels per module.
    public func png(scale: Int = 8) throws(VaultError) -> [UInt8] {
        let (side, pixels) = bitmap(scale: scale)
        return try GrayImage(width: side, height: side, pixels: pixels).png()
    }

    /// An SVG document: one path of unit squares, each dark run of a row a rectangle.
    public func svg(moduleSize: Int = 8) -> String {
        let side = size + 2 * Limits.qrQuietZone
        var path = ""
        for y in 0..<size {
            var x = 0
            while x < size {
                guard modules[y * size + x] else { x += 1; continue }
                let start = x
                while x < size && modules[y * size + x] { x += 1 }
                path += "M\(start + Limits.qrQuietZone) \(y + Limits.qrQuietZone)h\(x - start)v1h-\(x - start)z"
            }
        }
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 \(side) \(side)" \
            width="\(side * moduleSize)" height="\(side * moduleSize)" shape-rendering="crispEdges">
            <rect width="\(side)" height="\(side)" fill="#ffffff"/>
            <path d="\(path)" fill="#000000"/>
            </svg>

            """
    }
}
