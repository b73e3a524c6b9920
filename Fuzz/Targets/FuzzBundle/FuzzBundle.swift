import FuzzSupport
@testable import VaultCore

/// A share bundle's prefix (magic, version, header, signature) and its header.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    var offset = 0
    if let (header, _) = try? ShareBundle.parsePrefix({ count in
        defer { offset += count }
        return Array(bytes[min(offset, bytes.count)..<min(bytes.count, offset + count)])
    }) {
        fuzzCheck((try? BundleHeader(parsing: header.encoded())) == header, "header round trip")
    }
    if let header = try? BundleHeader(parsing: bytes) {
        fuzzCheck(header.encoded() == bytes, "one encoding per header")
    }
    return 0
}
