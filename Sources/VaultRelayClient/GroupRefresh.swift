import Foundation
import VaultCore
import VaultRelayProtocol

/// How a member learns its groups and opts in to them (Docs/RELAY.md, "Joining a group").
///
/// Anyone who knows a card can name it in a group. Before issue 37 every relay listed such
/// a group to the member at once, and every `vault receive` fetched each record, refused it
/// with a warning and did the same again next run: 1000 groups naming bob cost each of his
/// runs 1000 signed requests and 998 warnings (M2). Now a relay lists a group only to the
/// members who accepted it, and shows the others as invitations, with the owner's card. A
/// member takes an invitation only from an owner it trusts, and then accepts it on every
/// relay of the record; it declines the rest on the relay, and remembers each refusal, so
/// that no refused group costs a request or a warning again.
extension Messenger {
    /// At most this many invitations a relay are declined in one run: each is a signed
    /// request, which the member's rate limit at that relay counts. The rest are declined
    /// at the next runs, silently (they are remembered).
    static let declinesPerRun = 100
    /// At most this many refusals a relay are said in words in one run; more are counted.
    static let refusalsShown = 3

    /// A group from an owner this identity does not trust, as one relay listed it.
    struct Refused: Sendable {
        struct Key: Hashable, Sendable {
            let group: [UInt8]
            let owner: KeyCard
        }
        let key: Key
        /// Remembered first by this relay's answer, this run.
        let isNew: Bool

        init(group: [UInt8], owner: KeyCard, isNew: Bool) {
            key = Key(group: group, owner: owner)
            self.isNew = isNew
        }

        /// The group, as a refusal's line names it.
        var line: String { "group \(key.group.hex.prefix(8)) (owner's fingerprint \(key.owner.fingerprint))" }
    }

    /// Asks every pinned relay and every relay of a known group for the groups this
    /// identity accepted there (newer versions are taken) and for its invitations (taken
    /// from trusted owners, declined from others).
    static func refreshGroups(keystore: Keystore, identity: Identity, report: inout ReceiveReport) async {
        // Relays of groups left that were not told yet (out of reach at `vault group leave`),
        // and relays of kept groups that could not take their acceptance (out of reach when
        // the group was taken or joined again): asked again, silently, all at once and beside
        // the rest, so one that stalls no longer holds the rest back by its deadline first;
        // those still out of reach are asked at the next run.
        async let told = tellRelays((try? keystore.pendingDeclines()) ?? [], keystore: keystore, identity: identity)
        async let accepted = acceptAgain((try? keystore.pendingAccepts()) ?? [], keystore: keystore, identity: identity)
        // A relay that cannot be reached, or stalls, is asked nothing more in this refresh: it
        // costs the refresh one deadline, not one for each record it lists (RelayOutages).
        let outages = RelayOutages()
        var connections: [String: RelayConnection] = [:]
        for relay in (try? keystore.pinnedRelays()) ?? [] {
            connections[relay.card.fingerprint] = RelayConnection(name: relay.label.value, url: relay.url, card: relay.card, identity: identity)
                .sharing(outages)
        }
        for group in (try? keystore.groups()) ?? [] {
            for relay in group.relays where connections[relay.card.fingerprint] == nil {
                connections[relay.card.fingerprint] = RelayConnection(relay, identity: identity).sharing(outages)
            }
        }
        // Every relay is asked at once, so relays that stall cost one deadline between them,
        // not one each; a group several of them list is taken once (GroupTakes). Each relay's
        // lines are said in the order of the relays' names, whichever answered first.
        let takes = GroupTakes()
        let nowTrusted = (try? keystore.refusalsNowTrusted()) ?? []
        let asked = connections.values.sorted(by: { $0.name < $1.name })
        let reports = await withTaskGroup(of: (Int, ReceiveReport, [Refused]).self) { tasks in
            // Owners trusted since their groups were refused: asked about again, from the
            // relay that listed them.
            for (index, refusal) in nowTrusted.enumerated() {
                let connection = connections[refusal.relayCard.fingerprint]
                    ?? RelayConnection(name: refusal.relayURL, url: refusal.relayURL, card: refusal.relayCard, identity: identity).sharing(outages)
                tasks.addTask {
                    var report = ReceiveReport()
                    await take(refusal.group, version: refusal.version, ownerKey: refusal.owner, from: connection, keystore: keystore,
                               identity: identity, once: takes, report: &report)
                    return (index, report, [])
                }
            }
            for (index, connection) in asked.enumerated() {
                tasks.addTask {
                    var report = ReceiveReport()
                    var refused: [Refused] = []
                    do {
                        try await refreshAccepted(connection, keystore: keystore, identity: identity, takes: takes, report: &report)
                        try await answerInvitations(connection, keystore: keystore, identity: identity, takes: takes,
                                                    refused: &refused, report: &report)
                    } catch let error as RelayError where error.code == RelayOutages.code {
                        // Said once already, at the outage that gave the relay up.
                    } catch {
                        report.problems.append(VaultError.words(for: error))
                    }
                    return (nowTrusted.count + index, report, refused)
                }
            }
            var reports: [(Int, ReceiveReport, [Refused])] = []
            for await done in tasks { reports.append(done) }
            return reports.sorted { $0.0 < $1.0 }
        }
        let refusals = refusalLines(reports.dropFirst(nowTrusted.count).map { (asked[$0.0 - nowTrusted.count].name, $0.2) })
        for (index, done, _) in reports {
            report.groups += done.groups
            report.problems += done.problems
            if index >= nowTrusted.count { report.problems += refusals[index - nowTrusted.count] }
        }
        // Awaited, not left to the scope's end, which would cancel them.
        _ = await (told, accepted)
    }

    /// The lines that say the refusals new this run, a list for each relay's listing: each
    /// refusal once, under the first relay (by name) that listed it, whichever relay's
    /// answer remembered it first; up to `refusalsShown` a relay in words, the rest counted.
    private static func refusalLines(_ listings: [(relay: String, refused: [Refused])]) -> [[String]] {
        let new = Set(listings.flatMap { $0.refused.filter(\.isNew).map(\.key) })
        var said: Set<Refused.Key> = []
        return listings.map { relay, refused in
            let groups = refused.filter { new.contains($0.key) && said.insert($0.key).inserted }.map(\.line)
            var lines = groups.prefix(refusalsShown).map {
                "relay \(relay): \($0) names you, but its owner is not a peer you trust; refused (it is taken if you trust that owner later)"
            }
            if groups.count > refusalsShown {
                lines.append("relay \(relay): \(groups.count - refusalsShown) more groups from owners you do not trust name you; "
                             + "refused, and not asked about again")
            }
            return lines
        }
    }

    /// The groups accepted at this relay: a newer version of one is fetched and taken.
    private static func refreshAccepted(_ connection: RelayConnection, keystore: Keystore, identity: Identity,
                                        takes: GroupTakes, report: inout ReceiveReport) async throws {
        let (status, body) = try await connection.send(.GET, "/v1/groups")
        guard status == 200 else { throw RelayConnection.failure(relay: connection.name, status: status, body: body) }
        let list = try JSONDecoder().decode(RelayAPI.Groups.self, from: Data(body))
        let trusted = Set(try keystore.peers().map(\.card.signingKey) + [identity.card.signingKey])
        for entry in list.groups.prefix(1000) {
            guard let id = [UInt8](hexID: entry.id) else { continue }
            // A relay from before owners were listed does not say the owner (nor does a malformed one).
            let listedOwner = entry.owner.flatMap { Base64URL.decode($0, length: 32) }
            // The version alone, for most groups listed are known at it already.
            let knownVersion = try keystore.groupVersion(id: id)
            if let knownVersion, knownVersion >= entry.version { continue }
            let known = knownVersion == nil ? nil : try keystore.group(id: id)
            if let known, let listedOwner, listedOwner != known.owner.signingKey {
                // This relay's group of that id is another owner's (a squatter's, accepted
                // for this identity before opt-in): not the group kept here. Declined.
                try? await answerGroup(id, ownerKey: listedOwner, accept: false, on: connection)
                continue
            }
            if let known {
                if try isRefused(id, version: entry.version, owner: known.owner.signingKey, keystore: keystore, at: connection) { continue }
            } else if try await staysRefused(id, version: entry.version, owner: listedOwner, trusted: trusted, keystore: keystore,
                                             on: connection, declining: false) {
                continue
            }
            // Accepted by this identity: maybe by another machine of it, which trusts the
            // owner. An owner this machine does not trust is refused here, never declined
            // at the relay: a decline is the identity's, and would cut that machine off.
            await take(id, version: entry.version, ownerKey: known?.owner.signingKey ?? listedOwner, from: connection,
                       keystore: keystore, identity: identity, declineUntrusted: false, once: takes, report: &report)
        }
    }

    /// Whether a group a relay lists as accepted by this identity (a relay's members from
    /// before opt-in were accepted for them), and not kept here, stays refused: from an
    /// owner still not trusted (then declined there, silently), or a version no newer than
    /// the owner's record found not valid, or than this relay's damage. Not fetched again
    /// either way.
    ///
    /// The refusal is looked up for the owner the relay lists: by id alone, a squatter's
    /// refused group of the same id (at another relay) would keep out the owner's own. A
    /// relay that does not list owners gets the latest refusal of the id, and the decline
    /// names that refusal's owner: a relay whose group of that id has another owner answers
    /// `other_owner`, and that group is fetched and judged like any other.
    private static func staysRefused(_ id: [UInt8], version: UInt64, owner listed: [UInt8]?, trusted: Set<[UInt8]>,
                                     keystore: Keystore, on connection: RelayConnection, declining: Bool = true) async throws -> Bool {
        let found = if let listed { try keystore.refusal(group: id, owner: listed) } else { try keystore.refusal(group: id) }
        guard let refusal = found else { return false }
        switch refusal.reason {
        case .untrusted where !trusted.contains(refusal.owner):
            guard declining else { return true }
            do {
                try await answerGroup(id, ownerKey: refusal.owner, accept: false, on: connection)
            } catch let error as RelayError where error.code == "other_owner" {
                return false
            } catch {
                // Asked again at the next receive.
            }
            return true
        case .invalid, .damaged:
            return refusal.covers(version: version, at: connection.card)
        default:
            return false
        }
    }

    /// Whether a newer version of a group kept here, as `relay` lists it, is refused
    /// already: that relay served it damaged, or the owner's record of it was found not
    /// valid. Not fetched again: else a relay that lists a kept group at a version of its
    /// choosing, and serves anything, would cost a fetch and a warning at every receive.
    private static func isRefused(_ id: [UInt8], version: UInt64, owner: [UInt8], keystore: Keystore,
                                  at relay: RelayConnection) throws -> Bool {
        try keystore.refusal(group: id, owner: owner)?.covers(version: version, at: relay.card) ?? false
    }

    /// The groups that name this identity at this relay and that it has not answered there.
    private static func answerInvitations(_ connection: RelayConnection, keystore: Keystore, identity: Identity,
                                          takes: GroupTakes, refused: inout [Refused], report: inout ReceiveReport) async throws {
        let (status, body) = try await connection.send(.GET, "/v1/invitations", limit: 1 << 20)
        // A relay from before opt-in lists every group at /v1/groups, which did it above.
        if status == 404 { return }
        guard status == 200 else { throw RelayConnection.failure(relay: connection.name, status: status, body: body) }
        guard let list = try? JSONDecoder().decode(RelayAPI.Invitations.self, from: Data(body)) else {
            throw RelayError(relay: connection.name, code: "malformed", words: "its list of invitations is not valid")
        }
        let own = identity.card
        let trusted = Set(try keystore.peers().map(\.card) + [own])
        var declined = 0
        for entry in list.invitations.prefix(RelayAPI.maximumInvitations) {
            guard let id = [UInt8](hexID: entry.group), let owner = try? KeyCard(text: entry.owner) else { continue }
            // A group taken already (on another relay of it): accepted here too, for the owner
            // it has, so this relay lists it and serves its messages; unless a take this run
            // accepted it here already (on every relay its record names).
            if let known = try keystore.group(id: id) {
                if known.owner == owner {
                    let taken = await takes.taken(id)
                    // Read again after the wait: left meanwhile (by another process), it is
                    // not accepted here.
                    if !(taken.map { $0.owner == owner && $0.relays.contains { $0.card == connection.card } } ?? false),
                       try keystore.group(id: id) != nil {
                        try await answerGroup(id, ownerKey: owner.signingKey, accept: true, on: connection)
                    }
                    if entry.version > known.version,
                       try !isRefused(id, version: entry.version, owner: owner.signingKey, keystore: keystore, at: connection) {
                        await take(id, version: entry.version, ownerKey: owner.signingKey, from: connection, keystore: keystore,
                                   identity: identity, once: takes, report: &report)
                    }
                }
                continue
            }
            if let refusal = try keystore.refusal(group: id, owner: owner.signingKey) {
                switch refusal.reason {
                case .untrusted where !trusted.contains(owner):
                    // Refused already, and said so (or to be said, when another relay's
                    // answer remembered it this run): declined at this relay too, silently.
                    refused.append(Refused(group: id, owner: owner, isNew: false))
                    if declined < declinesPerRun {
                        declined += 1
                        try? await answerGroup(id, ownerKey: owner.signingKey, accept: false, on: connection)
                    }
                    continue
                case .invalid, .damaged:
                    if refusal.covers(version: entry.version, at: connection.card) { continue }
                default: break
                }
            }
            guard trusted.contains(owner) else {
                let isNew = try keystore.remember(GroupRefusal(group: id, owner: owner.signingKey, version: entry.version, reason: .untrusted,
                                                               relayURL: connection.url, relayCard: connection.card))
                refused.append(Refused(group: id, owner: owner, isNew: isNew))
                // Declined here, so the relay stops listing it; the refusal is remembered, so
                // it is taken if the owner is trusted later.
                if declined < declinesPerRun {
                    declined += 1
                    try? await answerGroup(id, ownerKey: owner.signingKey, accept: false, on: connection)
                }
                continue
            }
            await take(id, version: entry.version, ownerKey: owner.signingKey, from: connection, keystore: keystore,
                       identity: identity, once: takes, report: &report)
        }
    }

    /// ``take(_:version:ownerKey:from:keystore:identity:joining:report:)``, once a group,
    /// owner and version in this refresh (``GroupTakes``).
    private static func take(_ id: [UInt8], version: UInt64, ownerKey: [UInt8]?, from connection: RelayConnection, keystore: Keystore,
                             identity: Identity, declineUntrusted: Bool = true, once takes: GroupTakes, report: inout ReceiveReport) async {
        let said = await takes.once(id, owner: ownerKey, version: version) {
            var report = ReceiveReport()
            let taken = await take(id, version: version, ownerKey: ownerKey, from: connection, keystore: keystore, identity: identity,
                                   declineUntrusted: declineUntrusted, report: &report)
            return (report, taken)
        }
        report.groups += said.groups
        report.problems += said.problems
    }

    /// Fetches a group's record from `connection` and takes it when its owner is this
    /// identity or a trusted peer and it names this identity: kept here, and accepted on
    /// every relay it names. A record that is not taken is remembered as refused.
    ///
    /// A group this identity left is taken only when `joining` (`vault group join`): whatever
    /// a relay lists, at whatever version and for whatever owner, a receive declines it here.
    /// A refusal remembered of it never replaces the leave (the keystore keeps leaves), so a
    /// failed join keeps it as left.
    ///
    /// Returns the record kept, now or before (at the fetched version or newer), once the
    /// fetched one was accepted on every relay it names; nil when nothing was.
    @discardableResult
    static func take(_ id: [UInt8], version: UInt64, ownerKey: [UInt8]?, from connection: RelayConnection, keystore: Keystore,
                     identity: Identity, joining: Bool = false, declineUntrusted: Bool = true, report: inout ReceiveReport) async -> GroupRecord? {
        if !joining, let left = try? keystore.leftGroup(id) {
            try? await answerGroup(id, ownerKey: ownerKey ?? left.owner, accept: false, on: connection)
            return nil
        }
        do {
            let (status, bytes) = try await connection.send(.GET, "/v1/groups/\(id.hex)", limit: GroupRecord.maximumLength)
            guard status == 200 else { throw RelayConnection.failure(relay: connection.name, status: status, body: bytes) }
            do {
                let record = try GroupRecord(parsing: bytes)
                guard record.id == id else { throw VaultError.malformed(what: "the group record", detail: "it is for another group") }
                // A join takes nothing older than the version left: the keystore forgot the
                // group at the leave, so nothing else stops a relay from rolling it back.
                guard !joining || record.version >= version else {
                    throw VaultError.malformed(what: "the group record", detail: "it is older than the version you left (\(record.version) < \(version))")
                }
                guard ownerKey.map({ $0 == record.owner.signingKey }) ?? true else {
                    throw VaultError.malformed(what: "the group record", detail: "its owner is not the one the relay listed")
                }
                // Left by another process since the look above: the leave wins, and
                // declines it wherever it is listed.
                guard let stored = try keystore.take(group: record, joining: joining) else { return nil }
                if stored { report.groups.append(record.name) }
                for failure in await acceptEverywhere(record, keystore: keystore, identity: identity) {
                    report.problems.append(failure.description)
                }
                // Kept already at its version or newer: the record kept is what this run holds.
                return stored ? record : (try? keystore.group(id: id)) ?? record
            } catch {
                if let refusal = refusal(of: id, version: version, ownerKey: ownerKey, bytes: bytes, error: error, from: connection) {
                    _ = try? keystore.remember(refusal)
                    // An owner not trusted: so the relay lists it no more. A record that was
                    // not valid is not declined: its next version must still be listed.
                    if refusal.reason == .untrusted && declineUntrusted {
                        try? await answerGroup(id, ownerKey: refusal.owner, accept: false, on: connection)
                    }
                }
                report.problems.append("group \(id.hex.prefix(8)) from relay \(connection.name): \(VaultError.words(for: error)); not accepted")
            }
        } catch let error as RelayError where error.code == RelayOutages.code {
            // Said once already, at the outage that gave the relay up.
        } catch {
            report.problems.append(VaultError.words(for: error))
        }
        return nil
    }

    /// What a take that failed with `error` remembers, by whose doing it failed. The owner's
    /// own record of the id (it verified, from the owner listed) that is not one to take is
    /// refused at every relay: `untrusted`, or `invalid` up to its own version. Bytes that
    /// are not that (no record, another id's, another owner's) are the relay's doing:
    /// `damaged`, at that relay only, up to the version it listed. Were they refused
    /// everywhere, a relay could list a trusted owner's card beside an id at a version of
    /// its choosing, serve anything, and keep that owner's group out at every relay.
    ///
    /// The owner's record that failed for this machine's reasons (the keystore could not be
    /// written: a full disk, a lock held too long) is nobody's doing: nothing is remembered,
    /// and the next receive takes it. As `invalid`, it would have stayed out at every relay
    /// until the owner's next version.
    static func refusal(of id: [UInt8], version: UInt64, ownerKey: [UInt8]?, bytes: [UInt8], error: any Error,
                        from connection: RelayConnection) -> GroupRefusal? {
        let parsed = try? GroupRecord(parsing: bytes)
        if let record = parsed, record.id == id, ownerKey.map({ $0 == record.owner.signingKey }) ?? true {
            switch error as? VaultError {
            case .untrustedOwner?:
                return GroupRefusal(group: id, owner: record.owner.signingKey, version: version, reason: .untrusted,
                                    relayURL: connection.url, relayCard: connection.card)
            case .malformed?, .notForThisIdentity?:
                return GroupRefusal(group: id, owner: record.owner.signingKey, version: record.version, reason: .invalid,
                                    relayURL: connection.url, relayCard: connection.card)
            default:
                return nil
            }
        }
        return ownerKey.map {
            GroupRefusal(group: id, owner: $0, version: version, reason: .damaged, relayURL: connection.url, relayCard: connection.card)
        }
    }

    /// Accepts `record` on every relay it names, all at once (the owner's own record is its
    /// acceptance, so the owner needs none). Returns the relays that could not take it; each
    /// is remembered, and asked again at every receive until it takes it (``acceptAgain``).
    static func acceptEverywhere(_ record: GroupRecord, keystore: Keystore, identity: Identity) async -> [RelayError] {
        guard record.owner != identity.card else { return [] }
        let failures = await everyRelay(of: record, identity: identity) { connection in
            try await answerGroup(record.id, ownerKey: record.owner.signingKey, accept: true, on: connection)
        }
        let failed = Set(failures.filter { !acceptIsMoot($0) }.map(\.relay))
        try? keystore.remember(accepting: record.id, at: record.relays.filter { failed.contains($0.name.value) }.map(\.card))
        return failures
    }

    /// Asks each relay in `pending` again to accept its group for this identity, all at
    /// once, from an owner this identity still trusts (or is). Each that takes it, or has
    /// nothing of it to accept, is done with; the others are asked at the next receive.
    static func acceptAgain(_ pending: [PendingAccept], keystore: Keystore, identity: Identity) async {
        let trusted = Set(((try? keystore.peers()) ?? []).map(\.card) + [identity.card])
        // At most `declinesPerRun` a relay a run, as for declines: each is a signed request,
        // which the member's rate limit at that relay counts.
        var perRelay: [KeyCard: Int] = [:]
        let asked = pending.filter { accept in
            guard trusted.contains(accept.record.owner) else { return false }
            perRelay[accept.relay.card, default: 0] += 1
            return perRelay[accept.relay.card]! <= declinesPerRun
        }
        await withTaskGroup(of: PendingAccept?.self) { tasks in
            for accept in asked {
                tasks.addTask {
                    // Left meanwhile (by another process): not accepted again.
                    guard (try? keystore.group(id: accept.record.id)) != nil else { return nil }
                    do {
                        try await answerGroup(accept.record.id, ownerKey: accept.record.owner.signingKey, accept: true,
                                              on: RelayConnection(accept.relay, identity: identity))
                        return accept
                    } catch let error as RelayError {
                        return acceptIsMoot(error) ? accept : nil
                    } catch {
                        return nil
                    }
                }
            }
            for await done in tasks {
                if let done { try? keystore.accepted(group: done.record.id, at: done.relay.card) }
            }
        }
    }

    /// A relay that does not have the group, has a version that does not name this identity,
    /// or has it from another owner has nothing to accept. Should the owner publish a version
    /// there that names this identity, the relay lists it as an invitation, which any receive
    /// answers. A relay from before opt-in has no acceptances (404 on the route): it serves
    /// every member named.
    private static func acceptIsMoot(_ error: RelayError) -> Bool {
        ["unknown_group", "not_a_member", "other_owner", "http_404"].contains(error.code)
    }

    /// `POST /v1/groups/{id}/accept` or `…/decline`, for the owner this identity means.
    package static func answerGroup(_ id: [UInt8], ownerKey: [UInt8], accept: Bool, on connection: RelayConnection) async throws {
        let body = try JSONEncoder().encode(RelayAPI.Answer(owner: Base64URL.encode(ownerKey)))
        let (status, answer) = try await connection.send(.POST, "/v1/groups/\(id.hex)/\(accept ? "accept" : "decline")", body: [UInt8](body))
        guard status == 204 else { throw RelayConnection.failure(relay: connection.name, status: status, body: answer) }
    }
}

extension Messenger {
    /// `POST /v1/owners`: redeems an operator's invite at `relay`, so this identity may own
    /// groups there.
    public static func redeem(invite: String, at relay: PinnedRelay, identity: Identity) async throws {
        let connection = RelayConnection(name: relay.label.value, url: relay.url, card: relay.card, identity: identity)
        let body = try JSONEncoder().encode(RelayAPI.Redeem(invite: invite))
        let (status, answer) = try await connection.send(.POST, "/v1/owners", body: [UInt8](body))
        guard status == 204 else { throw RelayConnection.failure(relay: connection.name, status: status, body: answer) }
    }
}
