import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import VaultCore
import VaultRelayClient
import VaultRelayProtocol

/// The plain load of `vault-bench --relay --client plain` (Docs/DECISIONS.md, "A list's
/// plan on PostgreSQL, and the bench's plain client"): signed requests made before the
/// clock starts, sent over keep-alive HTTP/1.1 connections by one event loop, and each
/// answer's status checked, as a load generator such as wrk does.
///
/// The relay does all its work for each of them: the signature's check, the nonce's
/// write, the store and its own signed answer. What is left out is the client's own work,
/// signing at the moment of sending and checking each answer's signature, which vault's
/// client (``RelayBench/Member``) does and which shares the machine's cores with the relay.
/// So this tells what a relay can serve, and the other what one client machine sees.
package enum RelayLoad {
    /// One request, signed, and the status it must get.
    package struct Request: Sendable {
        let host: String
        let port: Int
        let head: HTTPRequestHead
        let body: ByteBuffer?
        let expected: Int

        /// `identity`'s request to the relay at `url` (`http://HOST:PORT`, as a bench relay
        /// is), whose card is `card`, signed now with a fresh nonce. It must be sent within
        /// the relay's time window (``RequestSignature/window``); later, the relay refuses
        /// it, and the refusal counts as a failure.
        package init(identity: Identity, url: String, card: KeyCard, method: String, path: String,
                    body: [UInt8] = [], expected: Int) throws {
            guard let parsed = URL(string: url), let host = parsed.host, let port = parsed.port else {
                throw RelayError(relay: url, code: "malformed", words: "its URL names no host and port")
            }
            var headers = HTTPHeaders([("Host", "\(host):\(port)")])
            for (field, value) in RequestSignature.headers(identity: identity, relay: card.signingKey, method: method,
                                                           path: path, bodyHash: sha256(body)) {
                headers.add(name: field, value: value)
            }
            if method != "GET" { headers.add(name: "Content-Length", value: String(body.count)) }
            self.host = host
            self.port = port
            self.head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: method), uri: path, headers: headers)
            self.body = body.isEmpty ? nil : ByteBuffer(bytes: body)
            self.expected = expected
        }
    }

    /// Sends `requests` over `connections` connections (each relay process gets its share
    /// of them), one request at a time on each, and times every one. An answer that takes
    /// longer than `deadline` fails the rest of its connection's requests.
    package static func run(_ name: String, requests: [Request], connections: Int,
                            deadline: TimeAmount = .seconds(30)) async -> RelayBench.Figures {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        // Each process gets an equal share of the connections, at least one.
        let processes = Dictionary(grouping: requests) { "\($0.host):\($0.port)" }
        var lanes: [[Request]] = []
        for mine in processes.values {
            let count = max(1, min(mine.count, connections / processes.count))
            for lane in 0..<count {
                lanes.append(stride(from: lane, to: mine.count, by: count).map { mine[$0] })
            }
        }
        let start = NIODeadline.now()
        let outcomes = await withTaskGroup(of: Lane.Outcome.self) { tasks in
            for lane in lanes {
                tasks.addTask { await Lane.run(lane, deadline: deadline, on: group.next()) }
            }
            var all: [Lane.Outcome] = []
            for await outcome in tasks { all.append(outcome) }
            return all
        }
        let seconds = Double((NIODeadline.now() - start).nanoseconds) / 1e9
        try? await group.shutdownGracefully()
        let latencies = outcomes.flatMap(\.latencies).sorted()
        let failed = outcomes.map(\.failed).reduce(0, +)
        return RelayBench.Figures(operation: name, count: latencies.count, failed: failed,
                                  failure: outcomes.lazy.compactMap(\.failure).first, seconds: seconds, latencies: latencies)
    }

    /// One connection, its requests in turn.
    private enum Lane {
        struct Outcome: Sendable {
            var latencies: [Double] = []
            var failed = 0
            var failure: String?
        }

        static func run(_ requests: [Request], deadline: TimeAmount, on loop: EventLoop) async -> Outcome {
            let done = loop.makePromise(of: Outcome.self)
            let connected = ClientBootstrap(group: loop)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: deadline))
                        try channel.pipeline.syncOperations.addHandler(Sender(requests, done: done))
                    }
                }
                .connect(host: requests[0].host, port: requests[0].port)
            connected.whenFailure { error in
                done.succeed(Outcome(failed: requests.count, failure: "cannot connect: \(error)"))
            }
            return (try? await done.futureResult.get()) ?? Outcome(failed: requests.count, failure: "the connection failed")
        }
    }

    /// Sends the next request once the answer to the last one has ended.
    private final class Sender: ChannelInboundHandler {
        typealias InboundIn = HTTPClientResponsePart
        typealias OutboundOut = HTTPClientRequestPart

        private let requests: [Request]
        private let done: EventLoopPromise<Lane.Outcome>
        private var next = 0
        private var began = NIODeadline.now()
        private var status = 0
        private var outcome = Lane.Outcome()
        private var finished = false

        init(_ requests: [Request], done: EventLoopPromise<Lane.Outcome>) {
            self.requests = requests
            self.done = done
        }

        func channelActive(context: ChannelHandlerContext) {
            send(context)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                status = Int(head.status.code)
            case .body:
                break
            case .end:
                guard next < requests.count else { return }
                let request = requests[next]
                if status == request.expected {
                    outcome.latencies.append(Double((NIODeadline.now() - began).nanoseconds) / 1e9)
                } else {
                    outcome.failed += 1
                    outcome.failure = outcome.failure ?? "status \(status), where \(request.expected) was expected"
                }
                next += 1
                send(context)
            }
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            guard event is IdleStateHandler.IdleStateEvent else { return context.fireUserInboundEventTriggered(event) }
            finish(failing: "no answer within the deadline")
            context.close(promise: nil)
        }

        func errorCaught(context: ChannelHandlerContext, error: Error) {
            finish(failing: "\(error)")
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            finish(failing: "the relay closed the connection")
        }

        private func send(_ context: ChannelHandlerContext) {
            guard next < requests.count else {
                finish(failing: nil)
                context.close(promise: nil)
                return
            }
            let request = requests[next]
            began = NIODeadline.now()
            context.write(wrapOutboundOut(.head(request.head)), promise: nil)
            if let body = request.body { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }

        /// Ends the lane once: what was not answered counts as failed.
        private func finish(failing words: String?) {
            guard !finished else { return }
            finished = true
            let unanswered = requests.count - next
            if unanswered > 0 {
                outcome.failed += unanswered
                outcome.failure = outcome.failure ?? words ?? "unanswered"
            }
            done.succeed(outcome)
        }
    }
}
