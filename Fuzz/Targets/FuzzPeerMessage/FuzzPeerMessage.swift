import FuzzSupport
@testable import VaultCore
@testable import VaultNet
@testable import VaultHolders

/// Peer-protocol messages after decryption: the header of a message's first frame, piece
/// requests, refusals, piece answers (protocol version 2), and pairing cards.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    if let (type, length, start) = try? PeerMessageType.parseHeader(bytes) {
        fuzzCheck(length <= type.maximumBody && UInt64(start.count) <= length, "header bounds")
    }
    if let request = PieceRequest(bytes) {
        fuzzCheck(PieceRequest(request.encoded) == request, "piece request round trip")
    }
    _ = Refusal.parse(bytes)
    if let code = bytes.first, let answer = try? PieceAnswer(code: code, fields: Array(bytes.dropFirst())) {
        fuzzCheck(answer.wire == bytes, "piece answer round trip")
    }
    _ = try? Pairing.parseCard(bytes, remoteKey: Array(repeating: 3, count: 32), handshakeHash: Array(repeating: 4, count: 64))
    return 0
}
