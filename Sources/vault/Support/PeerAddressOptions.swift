import ArgumentParser
import VaultCore
import VaultNet

/// `--peer LABEL=HOST:PORT`, where to reach a peer when its stored address is not enough.
struct PeerAddressOptions: ParsableArguments {
    @Option(name: .customLong("peer"), help: ArgumentHelp("Reach a peer at this address (repeatable).", valueName: "label=host:port"))
    var peers: [String] = []

    /// The address for each peer: given here, else stored with the peer, else found by mDNS
    /// (matching the short fingerprint) for those in `discovering`.
    func addresses(for peers: [Peer], discovering: [Peer], timeout: Double = 2) async throws -> [String: PeerAddress] {
        var all = try addresses(for: peers)
        let unknown = discovering.filter { all[$0.label.value] == nil }
        guard !unknown.isEmpty else { return all }
        let found = (try? await MDNSBrowser.browse(timeout: timeout, wanted: Set(unknown.map(\.card.shortFingerprint)))) ?? []
        for peer in unknown {
            if let service = found.first(where: { $0.fingerprint == peer.card.shortFingerprint }), let host = service.addresses.first {
                all[peer.label.value] = try? PeerAddress("\(host):\(service.port)")
            }
        }
        return all
    }

    /// The address for each peer: given here, else stored with the peer.
    func addresses(for peers: [Peer]) throws -> [String: PeerAddress] {
        var given: [String: PeerAddress] = [:]
        for entry in self.peers {
            guard let equals = entry.firstIndex(of: "=") else { throw ValidationError("--peer takes LABEL=HOST:PORT") }
            let label = try Label(String(entry[..<equals]))
            guard let peer = peers.first(where: { $0.label.value.lowercased() == label.value.lowercased() }) else {
                throw VaultError.unknownPeer(label.value)
            }
            given[peer.label.value] = try PeerAddress(String(entry[entry.index(after: equals)...]))
        }
        var all: [String: PeerAddress] = [:]
        for peer in peers { all[peer.label.value] = given[peer.label.value] ?? peer.address }
        return all
    }
}
