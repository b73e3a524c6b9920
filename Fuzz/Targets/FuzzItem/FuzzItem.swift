import FuzzSupport
@testable import VaultCore

/// An item export (header and stream, opened under a fixed key) and its armor.
let key = SecureBytes(copying: Array(repeating: 9, count: 32))

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    var source = BytesSource(bytes)
    if let (header, length) = try? ItemCrypto.readHeader(&source) {
        fuzzCheck((try? ItemHeader(parsing: header.encoded())) == header, "item header round trip")
        var rest = source
        _ = try? ItemCrypto.open(header, streamLength: length, source: &rest, itemKey: SharedKey.itemKey(key, headerHash: header.hash),
                                 password: { SecureBytes(copying: [1]) }) { _ in }
    }
    // The read-through before a recovery (armor, QR text or binary, counted without the
    // key): it takes whatever the header readers take, and never more than the stream.
    if (try? ItemInput.checkWhole(BytesSource(bytes))) != nil {
        var binary = BytesSource(bytes)
        if let (_, length) = try? ItemCrypto.readHeader(&binary) {
            let rest = (try? binary.readFully(Int(min(length, 1 << 24)) + 1)) ?? []
            fuzzCheck(UInt64(rest.count) == length, "a binary export read through whole holds its stated stream, nothing after")
        }
    }
    var armored = ArmorReader(BytesSource(bytes))
    if let decoded = try? armored.readFully(1 << 20) {
        // Armor that parses must be the one armor of what it decodes to.
        var out: [UInt8] = []
        let writer = try! ArmorWriter { out += $0 }
        try! decoded.withUnsafeBytes { try writer.write($0) }
        try! writer.finish()
        var again = ArmorReader(BytesSource(out))
        fuzzCheck((try? again.readFully(1 << 20)) == decoded, "armor round trip")
    }
    return 0
}
