import Foundation
import Hummingbird
import VaultCore
import VaultRelayProtocol

/// Groups on a relay: the owner registers and changes them; members read them.
extension Relay {
    /// `PUT /v1/groups/{group}`: a record signed by its owner, sent by its owner. A new
    /// group, or a higher version of one this owner registered.
    func putGroup(_ request: Request, group: [UInt8], caller: Caller) async throws -> Response {
        let bytes = try await smallBody(request, caller: caller, limit: GroupRecord.maximumLength)
        let record: GroupRecord
        do {
            record = try GroupRecord(parsing: bytes)
        } catch {
            throw RelayFailure.malformed("the group record is not valid: \(VaultError.words(for: error))")
        }
        guard record.id == group else { throw RelayFailure.malformed("the record is for another group") }
        // A relay keeps only groups that name it: it checks each share's index against its
        // own place in the record.
        guard record.relays.contains(where: { $0.card == identity.card }) else {
            throw RelayFailure.malformed("the group record does not name this relay (by its card)")
        }
        guard record.owner.signingKey == caller.key else {
            throw RelayFailure(status: .forbidden, code: "not_the_owner", words: "only the group's owner may change it")
        }
        if let stored = try await store.group(id: group), stored.owner != caller.key {
            throw RelayFailure(status: .forbidden, code: "not_the_owner", words: "only the group's owner may change it")
        }
        let stored = StoredGroup(id: group, version: record.version, owner: caller.key, record: bytes)
        guard try await store.put(group: stored, members: record.members.map(\.card.signingKey)) else {
            throw RelayFailure(status: .conflict, code: "stale", words: "the relay has this version of the group or a newer one")
        }
        return answer(.noContent, bytes: [], contentType: "application/octet-stream", nonce: caller.nonce)
    }

    /// `GET /v1/groups`: the groups the caller is a member of.
    func listGroups(caller: Caller) async throws -> Response {
        let groups = try await store.groups(member: caller.key)
        return answer(json: RelayAPI.Groups(groups: groups.map { RelayAPI.GroupEntry(id: $0.id.hex, version: $0.version) }),
                      nonce: caller.nonce)
    }

    /// `GET /v1/groups/{group}`: the record, for a member.
    func getGroup(group: [UInt8], caller: Caller) async throws -> Response {
        guard let stored = try await store.group(id: group) else { throw RelayFailure.unknownGroup() }
        guard try await store.isMember(caller.key, of: group) else { throw RelayFailure.notAMember() }
        return answer(.ok, bytes: stored.record, contentType: "application/octet-stream", nonce: caller.nonce)
    }
}
