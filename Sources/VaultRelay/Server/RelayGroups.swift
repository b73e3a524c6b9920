import Foundation
import Hummingbird
import VaultCore
import VaultRelayProtocol

/// Groups on a relay: an owner the operator allows registers and changes them; the members
/// they name opt in, and only then are they served (Docs/RELAY.md, "Joining a group").
extension Relay {
    /// `PUT /v1/groups/{group}`: a record signed by its owner, sent by its owner, who may own
    /// groups here. A new group, or a higher version of one this owner registered.
    func putGroup(_ request: Request, group: [UInt8], caller: Caller) async throws -> Response {
        let bytes = try await smallBody(request, caller: caller, limit: GroupRecord.maximumLength)
        let record: GroupRecord
        do {
            // (It refuses the guest box's id: a record under it would make its owner the judge
            // of who may use the guest box here.)
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
        guard try await mayOwnGroups(caller.key) else { throw RelayFailure.notAnOwner() }
        let stored = StoredGroup(id: group, version: record.version, owner: caller.key, record: bytes)
        let limits = GroupLimits(perOwner: configuration.groupsPerOwner, quotas: quotas)
        // The owner is checked in the store's transaction, not before it: two keys racing to
        // register one id cannot both win (L4).
        switch try await store.put(group: stored, ownerCard: record.owner.encoded, members: record.members.map(\.card.signingKey),
                                   limits: limits, now: Self.now()) {
        case .stored:
            return answer(.noContent, bytes: [], contentType: "application/octet-stream", nonce: caller.nonce)
        case .stale:
            throw RelayFailure(status: .conflict, code: "stale", words: "the relay has this version of the group or a newer one")
        case .otherOwner:
            throw RelayFailure(status: .forbidden, code: "not_the_owner", words: "only the group's owner may change it")
        case .tooManyGroups:
            throw RelayFailure(status: .forbidden, code: "too_many_groups",
                               words: "an owner may have at most \(configuration.groupsPerOwner) groups on this relay")
        case .overQuota:
            throw RelayFailure.overQuota("the owner's groups, or the relay, have used their quota on this relay")
        }
    }

    /// The quotas that messages and records count against.
    var quotas: Quotas {
        Quotas(group: configuration.groupQuota, owner: configuration.ownerQuota, total: configuration.totalQuota)
    }

    /// `GET /v1/groups`: the groups the caller is a member of and accepted.
    func listGroups(caller: Caller) async throws -> Response {
        let groups = try await store.groups(member: caller.key)
        return answer(json: RelayAPI.Groups(groups: groups.map { RelayAPI.GroupEntry(id: $0.id.hex, version: $0.version, owner: Base64URL.encode($0.owner)) }),
                      nonce: caller.nonce)
    }

    /// `GET /v1/invitations`: groups that name the caller and that it has not answered, with
    /// their owners, oldest first.
    func listInvitations(caller: Caller) async throws -> Response {
        let invitations = try await store.invitations(member: caller.key, limit: RelayAPI.maximumInvitations)
        return answer(json: RelayAPI.Invitations(invitations: invitations.map {
            RelayAPI.InvitationEntry(group: $0.group.hex, version: $0.version, owner: (try? KeyCard(encoded: $0.ownerCard).text) ?? "")
        }), nonce: caller.nonce)
    }

    /// `POST /v1/groups/{group}/accept` and `…/decline`: a member named in the group takes
    /// it, or turns it down (or leaves it). Signed by the member, over the owner it means.
    func answerGroup(_ request: Request, group: [UInt8], accepted: Bool, caller: Caller) async throws -> Response {
        let body = try await jsonBody(request, caller: caller, as: RelayAPI.Answer.self)
        guard let owner = Base64URL.decode(body.owner, length: 32) else { throw RelayFailure.malformed("owner is not 32 bytes of base64url") }
        switch try await store.answer(group: group, member: caller.key, owner: owner, accepted: accepted) {
        case .recorded:
            return answer(.noContent, bytes: [], contentType: "application/octet-stream", nonce: caller.nonce)
        case .unknownGroup:
            throw RelayFailure.unknownGroup()
        case .notNamed:
            throw RelayFailure(status: .forbidden, code: "not_a_member", words: "the group's record does not name the caller")
        case .otherOwner:
            throw RelayFailure(status: .conflict, code: "other_owner",
                               words: "this relay's group of that id has another owner (registered here first by someone else)")
        }
    }

    /// `GET /v1/groups/{group}`: the record, for a member it names, accepted or not: one is
    /// read before it is accepted.
    func getGroup(group: [UInt8], caller: Caller) async throws -> Response {
        guard let stored = try await store.group(id: group) else { throw RelayFailure.unknownGroup() }
        guard try await store.isNamed(caller.key, in: group) else { throw RelayFailure.notAMember() }
        return answer(.ok, bytes: stored.record, contentType: "application/octet-stream", nonce: caller.nonce)
    }

    /// `POST /v1/owners`: an invite the operator made (`vault relay invite`) lets the caller
    /// own groups here.
    func redeemInvite(_ request: Request, caller: Caller) async throws -> Response {
        let body = try await jsonBody(request, caller: caller, as: RelayAPI.Redeem.self)
        guard let token = RelayInvite.token(body.invite),
              try await store.redeem(invite: sha256(token), for: caller.key, now: Self.now()) else {
            throw RelayFailure(status: .forbidden, code: "bad_invite", words: "the invite is not valid here, used up, or expired")
        }
        return answer(.noContent, bytes: [], contentType: "application/octet-stream", nonce: caller.nonce)
    }
}

extension RelayFailure {
    static func notAnOwner() -> RelayFailure {
        .init(status: .forbidden, code: "not_an_owner",
              words: "this relay lets only the owners its operator lists own groups; ask the operator for an invite")
    }
}
