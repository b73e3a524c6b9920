import FuzzSupport
@testable import VaultCore
@testable import VaultNet

/// Noise XX as the responder (`vault serve`'s side): the input is cut into the first and
/// third handshake messages, then transport frames, each behind a 2-byte length as on TCP.
let responderSecret = SecureBytes(copying: Array(repeating: 5, count: 32))

func frames(_ bytes: [UInt8]) -> [[UInt8]] {
    var out: [[UInt8]] = [], offset = 0
    while offset + 2 <= bytes.count {
        let length = Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
        offset += 2
        out.append(Array(bytes[offset..<min(bytes.count, offset + length)]))
        offset += length
    }
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var messages = frames(fuzzBytes(data, size))[...]
    let responder = NoiseHandshake(initiator: false, identitySecret: responderSecret)
    guard let first = messages.popFirst(), (try? responder.readMessage(first)) != nil,
          (try? responder.writeMessage()) != nil,
          let third = messages.popFirst(), (try? responder.readMessage(third)) != nil,
          var session = try? responder.session() else { return 0 }
    fuzzCheck(responder.isComplete && responder.remoteStatic?.count == 32, "complete handshake")
    for frame in messages { _ = try? session.open(frame) }
    return 0
}
