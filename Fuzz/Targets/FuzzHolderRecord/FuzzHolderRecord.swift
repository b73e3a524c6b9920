import Foundation
import FuzzSupport
@testable import VaultCore
@testable import VaultHolders

/// A holder record (FORMAT §20), as a holder message's sealed body carries it: its head is
/// read (a piece request parsed whole, signature included), and for a release its bundle
/// prefix parsed as the requester parses it; an emergency rule or decision (FORMAT §21) parsed
/// whole, the dealer's signature included. Seeds: a signed piece request from a requester
/// without a share, each answer, a share offer's start, a signed rule and decision, a role
/// answer and a notice.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var source = BytesSource(Array(UnsafeBufferPointer(start: data, count: size)))
    guard let head = try? HolderRecord.readHead(&source) else { return 0 }
    // A request that parsed is the one encoding of itself.
    if case .pieceRequest(let request) = head, Array(UnsafeBufferPointer(start: data + 2, count: RelayPieceRequest.length)) != request.encoded() {
        fatalError("a piece request parsed from bytes it does not re-encode to")
    }
    // So is a rule or a decision.
    if case .emergencyRule(let rule) = head, Array(UnsafeBufferPointer(start: data + 2, count: EmergencyRule.length)) != rule.encoded {
        fatalError("an emergency rule parsed from bytes it does not re-encode to")
    }
    if case .emergencyDecision(let decision) = head,
       Array(UnsafeBufferPointer(start: data + 2, count: EmergencyDecision.length)) != decision.encoded {
        fatalError("an emergency decision parsed from bytes it does not re-encode to")
    }
    if case .pieceAnswer(_, .released, let prefix?) = head {
        var offset = 0
        _ = try? ShareBundle.parsePrefix { count in
            let end = min(offset + count, prefix.count)
            defer { offset = end }
            return Array(prefix[offset..<end])
        }
    }
    return 0
}
