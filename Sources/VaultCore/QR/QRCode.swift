import CQRencode

/// A QR code symbol made by libqrencode: a square of dark and light modules.
public struct QRCode: Sendable {
    /// Modules per side, without the quiet zone.
    public let size: Int
    /// Row-major, true for dark.
    let modules: [Bool]

    /// Encodes `text` at error-correction level M. libqrencode picks the modes itself, so
    /// an uppercase Bech32 run goes in the compact alphanumeric mode and a UTF-8 label in
    /// byte mode.
    public init(text: String) throws(VaultError) {
        let utf8 = Array(text.utf8)
        guard !utf8.contains(0), let symbol = QRcode_encodeString(text, 0, QR_ECLEVEL_M, QR_MODE_8, 1) else {
            throw .qrPayloadTooLarge(utf8.count)
        }
        defer { QRcode_free(symbol) }
        let width = Int(symbol.pointee.width)
        size = width
        modules = (0..<width * width).map { symbol.pointee.data[$0] & 1 == 1 }
    }

    init(size: Int, modules: [Bool]) {
        self.size = size
        self.modules = modules
    }

    /// Whether the module at (x, y) is dark; outside the symbol (the quiet zone) is light.
    public func isDark(x: Int, y: Int) -> Bool {
        x >= 0 && y >= 0 && x < size && y < size && modules[y * size + x]
    }
}
