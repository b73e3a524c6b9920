import FuzzSupport
@testable import VaultCore

/// A recovery kit's QR codes as zbar hands them over: the collector, one code a line, and
/// the share each complete set of codes parses into.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var collector = KitCodes.Collector()
    for line in fuzzBytes(data, size).split(separator: 0x0a) {
        guard KitCodes.isKitCode(Array(line)) else { continue }
        try? collector.add(Array(line))
    }
    guard let (complete, _) = try? collector.shares() else { return 0 }
    for share in complete {
        fuzzCheck(share.header.holderIndex >= 1 && share.header.holderIndex <= share.header.count, "holder index in range")
        fuzzCheck(UInt64(share.piece.count) == share.header.pieceLength, "piece length checked")
        _ = share.problem()
    }
    return 0
}
