import Foundation
import NIOCore
import NIOHTTP1
import VaultCore
import VaultRelayClient
import VaultRelayProtocol

/// The relay's side of `vault-bench --relay` (Docs/DECISIONS.md, "Issue 37: the relay
/// bench"): members of one group storing, listing, fetching and confirming small message
/// shares with signed requests, many at once, each timed.
public enum RelayBench {
    /// How one kind of request fared.
    public struct Figures: Sendable {
        /// What was timed.
        public let operation: String
        /// Requests answered as expected.
        public let count: Int
        /// Requests that failed (their first failure is in `failure`).
        public let failed: Int
        /// The first failure, in words.
        public let failure: String?
        /// Wall time for all of them.
        public let seconds: Double
        /// Each request's time, sorted, in seconds.
        public let latencies: [Double]

        /// Requests a second.
        public var rate: Double { Double(count) / max(seconds, 1e-9) }
        /// The median latency, seconds.
        public var median: Double { percentile(0.5) }
        /// The 99th percentile latency, seconds.
        public var p99: Double { percentile(0.99) }

        func percentile(_ p: Double) -> Double {
            guard !latencies.isEmpty else { return 0 }
            return latencies[min(latencies.count - 1, Int((Double(latencies.count) * p).rounded(.up)) - 1)]
        }
    }

    /// Runs `operation(i)` for i in 0..<count, `concurrency` at a time, timing each.
    public static func measure(_ name: String, count: Int, concurrency: Int,
                               _ operation: @escaping @Sendable (Int) async throws -> Void) async -> Figures {
        let clock = ContinuousClock()
        let start = clock.now
        var latencies: [Double] = []
        var failed = 0
        var failure: String?
        await withTaskGroup(of: (Double, String?).self) { tasks in
            var next = 0
            func launch() {
                let i = next
                next += 1
                tasks.addTask {
                    let began = clock.now
                    do {
                        try await operation(i)
                        return ((clock.now - began).seconds, nil)
                    } catch {
                        return ((clock.now - began).seconds, VaultError.words(for: error))
                    }
                }
            }
            while next < min(count, concurrency) { launch() }
            for await (seconds, error) in tasks {
                if let error {
                    failed += 1
                    failure = failure ?? error
                } else {
                    latencies.append(seconds)
                }
                if next < count { launch() }
            }
        }
        return Figures(operation: name, count: latencies.count, failed: failed, failure: failure, seconds: (clock.now - start).seconds,
                       latencies: latencies.sorted())
    }

    /// One member's signed requests to one relay process (several processes sharing a
    /// PostgreSQL store are one relay, with one card).
    public struct Member: Sendable {
        let connection: RelayConnection

        /// `identity` at the relay process at `url`, whose card is `card`.
        public init(identity: Identity, url: String, card: KeyCard) {
            connection = RelayConnection(name: url, url: url, card: card, identity: identity)
        }

        /// Registers `record` (this member is its owner).
        public func register(_ record: GroupRecord) async throws {
            try expect(204, try await connection.send(.PUT, "/v1/groups/\(record.idHex)", body: record.encoded, limit: 1 << 16))
        }

        /// Accepts `record`'s group, as its members do.
        public func accept(_ record: GroupRecord) async throws {
            try await Messenger.answerGroup(record.id, ownerKey: record.owner.signingKey, accept: true, on: connection)
        }

        /// Stores a message share held in memory.
        public func put(_ share: [UInt8], group: [UInt8], id: [UInt8]) async throws {
            try expect(201, try await connection.send(.PUT, "/v1/groups/\(group.hex)/messages/\(id.hex)", body: share, limit: 1 << 16))
        }

        /// Lists one page of what waits in `group`.
        public func list(group: [UInt8]) async throws {
            try expect(200, try await connection.send(.GET, "/v1/messages?limit=100&group=\(group.hex)"))
        }

        /// Fetches a share whole (at most 1 MiB).
        public func get(group: [UInt8], id: [UInt8]) async throws {
            try expect(200, try await connection.send(.GET, "/v1/groups/\(group.hex)/messages/\(id.hex)"))
        }

        /// Confirms a share.
        public func confirm(group: [UInt8], id: [UInt8]) async throws {
            try expect(204, try await connection.send(.POST, "/v1/groups/\(group.hex)/messages/\(id.hex)/confirm", limit: 1 << 16))
        }

        private func expect(_ status: Int, _ answer: (Int, [UInt8])) throws {
            guard answer.0 == status else { throw RelayConnection.failure(relay: connection.name, status: answer.0, body: answer.1) }
        }
    }
}

extension Duration {
    fileprivate var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
