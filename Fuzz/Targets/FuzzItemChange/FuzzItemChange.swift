import FuzzSupport
@testable import VaultCore

/// An item change (FORMAT §18): a record that reads (signature included) is the one
/// encoding of itself; a stored record reads as it did.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    if let change = try? ItemChange(record: bytes) {
        fuzzCheck((try? ItemChange(stored: bytes)) == change, "a verified record reads again as stored")
        fuzzCheck(Array(bytes[SignedFrame.startLength..<(bytes.count - 64)]) == change.body(), "one encoding per change")
    }
    _ = try? ItemChange(stored: bytes)
    return 0
}
