import Foundation
import Testing
@testable import VaultCore
@testable import VaultHolders
import VaultTestSupport

/// The keystore's queue of requests through relays (``Keystore/addHolderRequest``): its
/// bounds hold a flooding peer back, and never an owner who recovers often.
@Suite struct HolderQueueTests {
    let directory = TemporaryDirectory()

    func keystoreWithPeer() throws -> (Keystore, Peer) {
        let keystore = try Keystore.create(home: VaultHome(directory: directory.file("bob")), label: Label("bob"), passphrase: nil)
        let peer = try keystore.addPeer(Identity.generate(label: try Label("alice")).0.card, label: Label("alice"), address: nil)
        return (keystore, peer)
    }

    func add(_ keystore: Keystore, from peer: Peer, state: HolderRequest.State = .waiting) throws -> HolderIntake {
        try keystore.addHolderRequest(nonce: SecureRandom().bytes(16), kind: .share, groupID: Array(repeating: 1, count: 16),
                                      peer: peer, secretRow: nil, record: Array("offer".utf8), state: state,
                                      expires: UInt64(Date().timeIntervalSince1970) + 3600)
    }

    /// Decided requests (here released automatically, as for an owner with an opt-in) do
    /// not fill the peer's 16 waiting places: the 17th and the 100th are taken. Before, every
    /// kept request counted, and a 16th recovery in three days was refused as busy.
    @Test func decidedRequestsLeaveRoomForMore() throws {
        let (keystore, alice) = try keystoreWithPeer()
        for _ in 0..<100 {
            guard case .added = try add(keystore, from: alice, state: .automatic) else {
                Issue.record("an automatic release was refused as busy")
                return
            }
        }
        guard case .added = try add(keystore, from: alice) else {
            Issue.record("a waiting request after 100 decided ones was refused")
            return
        }
    }

    /// 16 waiting requests from one peer fill its places; a 17th is busy, and another
    /// peer's is still taken.
    @Test func sixteenWaitingFillAPeersPlaces() throws {
        let (keystore, alice) = try keystoreWithPeer()
        for _ in 0..<ConsentLimits.holderRequestsPerPeer {
            guard case .added = try add(keystore, from: alice) else {
                Issue.record("a request within the bound was refused")
                return
            }
        }
        guard case .busy = try add(keystore, from: alice) else {
            Issue.record("a 17th waiting request was taken")
            return
        }
        let carol = try keystore.addPeer(Identity.generate(label: try Label("carol")).0.card, label: Label("carol"), address: nil)
        guard case .added = try add(keystore, from: carol) else {
            Issue.record("another peer's request was refused")
            return
        }
    }

    /// Whatever their state, at most 256 records of one peer are kept (their nonces are
    /// remembered until they are forgotten), so the table stays bounded.
    @Test func aPeersRecordsAreBoundedInAnyState() throws {
        let (keystore, alice) = try keystoreWithPeer()
        for _ in 0..<ConsentLimits.holderRecordsPerPeer {
            guard case .added = try add(keystore, from: alice, state: .answered) else {
                Issue.record("a record within the bound was refused")
                return
            }
        }
        guard case .busy = try add(keystore, from: alice, state: .answered) else {
            Issue.record("a 257th record was kept")
            return
        }
    }
}
