import FuzzSupport
@testable import VaultCore
import VaultRelayProtocol

/// Share links (Docs/LINKS.md): a link's address as pasted, its metadata as a blob's first
/// chunk opens to, and a blob opened under a fixed key (its framing and lengths; the AEAD
/// refuses what the fuzzer makes up).
let key = SecureBytes(copying: Array(repeating: 7, count: 32))

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    if let text = String(validating: bytes, as: UTF8.self), let address = try? LinkAddress(parsing: text) {
        fuzzCheck((try? LinkAddress(parsing: address.text))?.text == address.text, "a link reads back as it prints")
        fuzzCheck(address.id.count == LinkAPI.idLength, "id length")
    }
    if let meta = try? LinkMeta(parsing: bytes) {
        fuzzCheck((try? LinkMeta(kind: meta.kind, name: meta.name)) != nil, "metadata that parses is valid")
    }
    if let opener = try? LinkOpener(key: key, blobLength: UInt64(bytes.count), metaReady: { _ in }, content: { _ in }) {
        var refused = false
        var offset = 0
        while offset < bytes.count, !refused {
            let end = min(bytes.count, offset + 1 + (offset * 31) % 70_000)
            do {
                try bytes[offset..<end].withUnsafeBytes { try opener.take($0) }
            } catch {
                refused = true
            }
            offset = end
        }
        if !refused { _ = try? opener.finish() }
    }
    return 0
}
