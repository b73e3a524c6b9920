import FuzzSupport
@testable import VaultCore

/// A message share (FORMAT §17) and its header, as a relay reads an upload and a recipient
/// a download: taken in uneven pieces, finished, checked against the clock; a header that
/// parses is the one encoding of itself.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    var incoming = IncomingRelayMessage(maximumLength: 1 << 20)
    var offset = 0
    var refused = false
    while offset < bytes.count, !refused {
        let end = min(bytes.count, offset + 1 + (offset * 7919) % 4093)
        do {
            try bytes[offset..<end].withUnsafeBytes { try incoming.take($0) }
        } catch {
            refused = true
        }
        offset = end
    }
    if !refused {
        _ = try? incoming.finish()
        _ = try? incoming.checkCreated(now: 1_800_000_000, slack: 600)
        if let envelope = incoming.envelope {
            fuzzCheck(envelope.expiresAt > envelope.createdAt, "a share expires after it was made")
        }
        if let header = incoming.share?.header {
            fuzzCheck(header.kind.isNumberingNotice || header.recipients.allSatisfy { $0.sequence >= 1 }, "content is numbered from 1")
        }
    }
    if let header = try? MessageHeader(parsing: bytes) {
        fuzzCheck(header.encoded() == bytes, "one encoding per header")
        fuzzCheck(header.index >= 1 && header.index <= header.count && header.count <= GroupRecord.maximumRelays, "index in range")
    }
    return 0
}
