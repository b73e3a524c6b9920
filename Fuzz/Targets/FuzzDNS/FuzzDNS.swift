import FuzzSupport
@testable import VaultNet

/// DNS messages as mDNS receives them: parse, serialize, parse again.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard let message = try? DNSMessage(parsing: fuzzBytes(data, size)) else { return 0 }
    let again = try? DNSMessage(parsing: message.encoded())
    fuzzCheck(again == message, "DNS round trip")
    return 0
}
