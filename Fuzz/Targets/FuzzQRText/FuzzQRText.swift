import FuzzSupport
@testable import VaultCore

/// QR payloads as a phone's scanner returns them: an item's QR text, and Bech32 itself.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard let text = String(validating: fuzzBytes(data, size), as: UTF8.self) else { return 0 }
    if let export = try? ItemArmor.export(fromQRText: text) {
        fuzzCheck((try? ItemArmor.export(fromQRText: ItemArmor.qrText(export))) == export, "QR text round trip")
    }
    if let (hrp, bytes) = try? Bech32.decode(text, maximumLength: ItemArmor.maximumQRText) {
        fuzzCheck((try? Bech32.decode(Bech32.encode(hrp: hrp, data: bytes), maximumLength: ItemArmor.maximumQRText))?.data == bytes,
                  "Bech32 round trip")
    }
    return 0
}
