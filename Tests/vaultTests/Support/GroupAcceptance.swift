import Foundation
import VaultCore
import VaultRelayProtocol

extension User {
    /// This user's identity, from its keystore (made without a passphrase).
    func signingIdentity() throws -> Identity {
        try Keystore.open(home: VaultHome.resolve(explicit: directory.file("home"))).unlock(passphrase: nil)
    }

    /// Accepts the group `group` (32 hex digits) of `owner` on each relay at `urls`, as
    /// `vault receive` does for a group from a trusted owner: a signed `POST …/accept`
    /// naming the owner (Docs/RELAY.md, "Joining a group"). For worlds in which a member is
    /// in a group from the start; the member's keystore learns the group at its next receive.
    func acceptGroup(_ group: String, of owner: User, at urls: [String]) throws {
        let identity = try signingIdentity()
        let ownerKey = try owner.signingIdentity().card.signingKey
        for url in urls {
            let card = try JSONDecoder().decode(RelayAPI.Card.self, from: try Data(contentsOf: URL(string: url + "/card")!)).card
            let body = [UInt8](try JSONEncoder().encode(RelayAPI.Answer(owner: Base64URL.encode(ownerKey))))
            let target = "/v1/groups/\(group)/accept"
            let headers = RequestSignature.headers(identity: identity, relay: try KeyCard(text: card).signingKey, method: "POST",
                                                   path: target, bodyHash: sha256(body))
            let answer = try LoopbackHTTP(port: Int(url.split(separator: ":").last!)!)
                .exchange(LoopbackHTTP.request("POST", target, headers: headers, body: body))
            guard answer.status == 204 else { throw LoopbackHTTP.Failure(description: "accepting at \(url): \(answer)") }
        }
    }
}
