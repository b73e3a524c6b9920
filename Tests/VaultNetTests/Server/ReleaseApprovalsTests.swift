import Foundation
import Testing
@testable import VaultCore
@testable import VaultHolders
@testable import VaultNet

@Suite struct ReleaseApprovalsTests {
    let holders: Holders
    init() throws { holders = try Holders(["alice", "bob", "carol"], autoRelease: false) }

    @Test func oneApprovalReleasesOnce() throws {
        let approvals = ReleaseApprovals(window: 60)
        let header = try holders.secret(of: 1).header
        let alice = try holders.peer("alice", at: 1)
        guard case .waiting(let id, let seconds, true) = approvals.stand(peer: alice, header: header, requester: 0) else {
            Issue.record("a first request must wait")
            return
        }
        #expect(seconds == 60 && id.count == 8)
        // Asking again is the same request, not a new one.
        #expect(approvals.stand(peer: alice, header: header, requester: 0) == .waiting(id: id, seconds: 60, new: false))
        #expect(approvals.isOpen(peerKey: alice.card.agreementKey, secretID: header.secretID))
        #expect(approvals.decide(String(id.prefix(3)), approve: true) == nil)  // too short to name one
        #expect(approvals.decide(String(id.prefix(4)), approve: true)?.id == id)
        #expect(approvals.waiting().isEmpty)
        #expect(approvals.stand(peer: alice, header: header, requester: 0) == .approved)
        // Used up: the next ask is a new request.
        guard case .waiting(_, _, true) = approvals.stand(peer: alice, header: header, requester: 0) else {
            Issue.record("an approval must release once")
            return
        }
    }

    @Test func denialsAndSilenceEndTheRequest() throws {
        let header = try holders.secret(of: 1).header
        let alice = try holders.peer("alice", at: 1)
        let approvals = ReleaseApprovals(window: 60)
        guard case .waiting(let id, _, _) = approvals.stand(peer: alice, header: header, requester: 0) else { return }
        _ = approvals.decide(id, approve: false)
        #expect(approvals.stand(peer: alice, header: header, requester: 0) == .denied)
        let start = Date()
        _ = approvals.stand(peer: alice, header: header, requester: 0, now: start)
        #expect(approvals.stand(peer: alice, header: header, requester: 0, now: start.addingTimeInterval(61)) == .timedOut)
    }

    @Test func theTableIsBounded() throws {
        let approvals = ReleaseApprovals(window: 60)
        let header = try holders.secret(of: 1).header
        // Distinct peers filling the table.
        let keystore = holders.keystores[1]
        func stranger(_ number: Int) throws -> Peer {
            let card = try Identity(label: Label("x"), card: nil, secret: SecureBytes.random(count: 64)).card
            try keystore.addPeer(card, label: Label("stranger\(number)"), address: nil)
            return try keystore.peer(named: "stranger\(number)")
        }
        for number in 0..<NetLimits.pendingApprovals {
            guard case .waiting = approvals.stand(peer: try stranger(number), header: header, requester: 0) else {
                Issue.record("room for \(NetLimits.pendingApprovals)")
                return
            }
        }
        #expect(approvals.stand(peer: try stranger(999), header: header, requester: 0) == .busy)
    }
}

extension ReleaseApprovalsTests {
    @Test func approvingOnePeersRequestLeavesAnothersWaiting() throws {
        let approvals = ReleaseApprovals(window: 60)
        let header = try holders.secret(of: 2).header
        let alice = try holders.peer("alice", at: 2), bob = try holders.peer("bob", at: 2)
        guard case .waiting(let first, _, true) = approvals.stand(peer: alice, header: header, requester: 0),
              case .waiting(let second, _, true) = approvals.stand(peer: bob, header: header, requester: 1) else {
            Issue.record("both must wait")
            return
        }
        #expect(approvals.decide(first, approve: true) != nil)
        #expect(approvals.stand(peer: bob, header: header, requester: 1) == .waiting(id: second, seconds: 60, new: false))
    }

    @Test func aRequestItsRequesterStoppedAskingIsWithdrawn() throws {
        let approvals = ReleaseApprovals(window: 60)
        let header = try holders.secret(of: 2).header
        let alice = try holders.peer("alice", at: 2)
        let start = Date()
        guard case .waiting(let id, _, true) = approvals.stand(peer: alice, header: header, requester: 0, now: start) else { return }
        // Asked again within the poll interval: still the same request.
        #expect(approvals.stand(peer: alice, header: header, requester: 0, now: start + 4) == .waiting(id: id, seconds: 56, new: false))
        // Then silence: it is no longer listed, and cannot be approved by mistake.
        #expect(approvals.waiting(now: start + 10).isEmpty)
        #expect(approvals.decide(id, approve: true, now: start + 10) == nil)
        // Asking again later is a new request.
        guard case .waiting(let renewed, _, true) = approvals.stand(peer: alice, header: header, requester: 0, now: start + 11) else {
            Issue.record("a renewed ask must be a new request")
            return
        }
        #expect(renewed != id)
    }
}
