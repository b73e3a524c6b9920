import VaultCore

/// Reads terminal QR text back into modules: the inverse of ``QRCode/terminalText``.
public enum TerminalQR {
    /// A bitmap of the code drawn in `text`; nil if the text is not a rectangle of cells.
    public static func bitmap(from text: String, invert: Bool, scale: Int = 4) -> GrayImage? {
        let plain = text.replacing(/\u{1B}\[[0-9;]*m/, with: "")
        let lines = plain.split(separator: "\n").map(Array.init)
        guard let width = lines.first?.count, lines.allSatisfy({ $0.count == width }) else { return nil }
        var rows: [[Bool]] = []  // true = dark module
        for line in lines {
            var top: [Bool] = [], bottom: [Bool] = []
            for cell in line {
                let (inkTop, inkBottom): (Bool, Bool) = switch cell {
                case "█": (true, true)
                case "▀": (true, false)
                case "▄": (false, true)
                default: (false, false)
                }
                // Without inversion ink is light; with it, ink is dark.
                top.append(inkTop == invert)
                bottom.append(inkBottom == invert)
            }
            rows += [top, bottom]
        }
        let side = width * scale
        var pixels = [UInt8](repeating: 255, count: side * rows.count * scale)
        for (y, row) in rows.enumerated() {
            for (x, dark) in row.enumerated() where dark {
                for dy in 0..<scale { for dx in 0..<scale { pixels[(y * scale + dy) * side + x * scale + dx] = 0 } }
            }
        }
        return GrayImage(width: side, height: rows.count * scale, pixels: pixels)
    }
}
