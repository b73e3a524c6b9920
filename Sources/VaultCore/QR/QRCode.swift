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

    /// Encodes text held in locked memory (a recovery kit's code, which carries a key
    /// share), at error-correction level `level` (M unless asked; a kit's codes take Q,
    /// for paper that folds and fades). libqrencode's own buffers are freed unwiped: the
    /// code is a picture of the share anyway, printed on purpose.
    init(text: SecureBytes, level: QRecLevel = QR_ECLEVEL_M) throws(VaultError) {
        let terminated = SecureBytes(count: text.count + 1)
        terminated.withUnsafeMutableBytes { out in text.withUnsafeBytes { out.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
        let symbol = terminated.withUnsafeBytes { bytes in
            QRcode_encodeString(bytes.baseAddress!.assumingMemoryBound(to: CChar.self), 0, level, QR_MODE_8, 1)
        }
        guard let symbol else { throw .qrPayloadTooLarge(text.count) }
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
