import FuzzSupport
@testable import VaultCore

/// The threshold layer's plaintext: the password layer's header (N bounded before any
/// work), the inner stream, and the payload header with its metadata fields.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    // scrypt at the minimum N only: larger N is refused or merely slow, not a parser path.
    if bytes.count >= 2, bytes[0] == 1, bytes[1] != 15 { return 0 }
    for type in [SecretType.note, .file, .password, .contact] {
        let payload = PayloadParser(expectedType: type.rawValue) { _ in }
        let layer = PasswordLayerParser(payload: payload) { SecureBytes(copying: Array("password".utf8)) }
        do {
            try bytes.withUnsafeBytes { try layer.write($0) }
            try layer.finish()
            if let metadata = payload.metadata {
                fuzzCheck((try? SecretMetadata.parse(metadata.encoded())) == metadata, "metadata round trip")
            }
        } catch {}
    }
    if let metadata = try? SecretMetadata.parse(bytes) {
        fuzzCheck(metadata.encoded() == bytes, "one encoding per metadata")
    }
    return 0
}
