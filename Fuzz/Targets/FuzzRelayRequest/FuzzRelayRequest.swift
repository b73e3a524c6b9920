import Foundation
import FuzzSupport
import VaultCore
import VaultRelayProtocol

/// What a relay reads of a request besides its binary body (Docs/RELAY.md, "API"): the
/// signing headers (lines of `Name: value`), and every JSON body of the API, each decoded
/// from the input. Nothing may crash; headers that parse re-read the same.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    let text = String(decoding: bytes, as: UTF8.self)
    var fields: [String: String] = [:]
    for line in text.split(separator: "\n").prefix(64) {
        guard let colon = line.firstIndex(of: ":") else { continue }
        fields[String(line[..<colon])] = String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
    }
    if let headers = try? SignedHeaders({ fields[$0] }) {
        fuzzCheck(headers.key.count == 32 && headers.nonce.count == RequestSignature.nonceLength && headers.signature.count == 64,
                  "header lengths")
        fuzzCheck((try? SignedHeaders({ fields[$0] })) == headers, "headers read the same twice")
    }
    _ = SignedHeaders.present { fields[$0] }
    let json = Data(bytes)
    let decoder = JSONDecoder()
    _ = try? decoder.decode(RelayAPI.Answer.self, from: json)
    _ = try? decoder.decode(RelayAPI.Redeem.self, from: json)
    _ = try? decoder.decode(RelayAPI.Card.self, from: json)
    _ = try? decoder.decode(RelayAPI.Groups.self, from: json)
    _ = try? decoder.decode(RelayAPI.Invitations.self, from: json)
    _ = try? decoder.decode(RelayAPI.Receipts.self, from: json)
    _ = try? decoder.decode(RelayAPI.Failure.self, from: json)
    _ = try? decoder.decode(LinkAPI.Claim.self, from: json)
    _ = try? decoder.decode(LinkAPI.Status.self, from: json)
    _ = try? decoder.decode(LinkAPI.Created.self, from: json)
    _ = try? decoder.decode(LinkAPI.Info.self, from: json)
    _ = try? decoder.decode(RelayAPI.Messages.self, from: json)
    if let token = RelayInvite.token(text) { fuzzCheck(token.count == 32, "an invite is 32 bytes") }
    _ = Base64URL.decode(text)
    return 0
}
