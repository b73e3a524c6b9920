import FuzzSupport
@testable import VaultCore

/// An object message (FORMAT §19) as a relay and a recipient read it, in uneven pieces, and
/// its header on its own: a header that parses is the one encoding of itself.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    var incoming = IncomingObjectMessage(maximumLength: 1 << 20)
    var offset = 0
    var refused = false
    while offset < bytes.count, !refused {
        let end = min(bytes.count, offset + 1 + (offset * 104729) % 3001)
        do {
            try bytes[offset..<end].withUnsafeBytes { try incoming.take($0) }
        } catch {
            refused = true
        }
        offset = end
    }
    if !refused { _ = try? incoming.finish() }
    if let header = try? ObjectHeader(parsing: bytes) {
        fuzzCheck(header.encoded() == bytes, "one encoding per header")
        fuzzCheck(header.expiresAt > header.createdAt, "it expires after it was made")
    }
    return 0
}
