import Foundation
import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// How many connections a relay holds and how long it waits on each (Docs/RELAY.md,
/// "Connections"). Before issue 37 there were no deadlines and no caps: 600 connections
/// that never finished their headers took a relay off the air for as long as they were held
/// (M3, slowloris).
public struct ConnectionLimits: Sendable {
    /// Connections in all; the relay also keeps this below its file descriptor limit.
    public var total = 4096
    /// Connections from one client address (IPv4, or IPv6 /64); 0 for no cap (a relay
    /// behind a proxy sees every client at the proxy's address).
    public var perAddress = 64
    /// Seconds from a new connection, or from a request's first byte, to its complete head.
    public var header: Int64 = 10
    /// Seconds a connection may wait between requests with nothing arriving.
    public var idle: Int64 = 60
    /// Seconds a body may stay silent while the relay waits for it; past the first such
    /// span, it must also arrive at ``minimumBodyRate`` on average.
    public var body: Int64 = 30
    /// Bytes a second a body must average, counting only the time the relay waited for it.
    public var minimumBodyRate = 1024
    /// Seconds a client may take nothing of an answer while the relay has more to write.
    public var write: Int64 = 60

    /// The defaults.
    public init() {}
}

/// The connections a relay process holds, by client address: admitted under the caps, or
/// refused (closed at once, before anything is read).
final class ConnectionTable: @unchecked Sendable {
    private let lock = NSLock()
    private var byAddress: [[UInt8]: Int] = [:]
    private var count = 0
    private let limits: ConnectionLimits

    init(limits: ConnectionLimits) { self.limits = limits }

    /// Connections held now.
    var held: Int { lock.withLock { count } }

    func admit(_ address: [UInt8]) -> Bool {
        lock.withLock {
            guard count < limits.total else { return false }
            let mine = byAddress[address, default: 0]
            guard limits.perAddress == 0 || mine < limits.perAddress else { return false }
            byAddress[address] = mine + 1
            count += 1
            return true
        }
    }

    func release(_ address: [UInt8]) {
        lock.withLock {
            count -= 1
            let left = byAddress[address, default: 1] - 1
            byAddress[address] = left > 0 ? left : nil
        }
    }
}

/// Holds one connection to its caps and deadlines. It sits after the HTTP decoder (it sees
/// a request's head, body and end, and an answer's end) and puts a byte counter of its own
/// at the front of the pipeline, before TLS, which sees every byte that arrives and every
/// read the relay asks for.
///
/// Time is counted against a client only while the relay waits for it: a body that stops
/// arriving because the relay stopped reading (its store is slow) is not the client's
/// doing. Every second, the phase the connection is in is checked:
///
/// - waiting for a request: a first request's head must be whole within ``ConnectionLimits/header``
///   of the connection; a later one may start within ``ConnectionLimits/idle`` of the
///   previous answer, and be whole within ``ConnectionLimits/header`` of its first byte;
/// - reading a body: no silence over ``ConnectionLimits/body``, and past that, at least
///   ``ConnectionLimits/minimumBodyRate`` on average, while the relay reads;
/// - answering: the client must take some of the answer within ``ConnectionLimits/write``
///   whenever the relay has some to write (a waiting list writes nothing for 30 s, and
///   that is not the client's fault).
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private enum Phase {
        /// Before a request: since when, and whether it is the connection's first.
        case waiting(since: NIODeadline, first: Bool)
        /// A request's body: the time waited for bytes and the bytes received before it.
        case body(waited: TimeAmount, received: Int64)
        /// The request is in; its answer is being made or written.
        case answering
    }

    private let table: ConnectionTable
    private let limits: ConnectionLimits
    private let bytes = ByteWatch()
    private var phase = Phase.waiting(since: .now(), first: true)
    private var address: [UInt8]?
    private var check: RepeatedTask?
    /// Since when the relay has had more to write and the client took none of it.
    private var unwritableSince: NIODeadline?

    init(table: ConnectionTable, limits: ConnectionLimits) {
        self.table = table
        self.limits = limits
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { stop() }

    func channelInactive(context: ChannelHandlerContext) {
        stop()
        context.fireChannelInactive()
    }

    /// Admits the connection under the caps, or closes it before anything is read.
    private func start(_ context: ChannelHandlerContext) {
        guard address == nil, check == nil else { return }
        let key = AddressPrefix.key(context.channel.remoteAddress)
        guard table.admit(key) else {
            context.close(promise: nil)
            return
        }
        address = key
        enterWaiting(first: true)
        try? context.pipeline.syncOperations.addHandler(bytes, position: .first)
        // The task runs on this connection's event loop, as the handler does; it is
        // cancelled when the connection closes.
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        check = context.eventLoop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { _ in
            let (handler, context) = bound.value
            if handler.isOverdue() { context.close(promise: nil) }
        }
    }

    private func stop() {
        check?.cancel()
        check = nil
        if let address { table.release(address) }
        address = nil
    }

    private func enterWaiting(first: Bool) {
        phase = .waiting(since: .now(), first: first)
        bytes.mark()
    }

    /// Whether the connection has passed a deadline of its phase. On the event loop.
    private func isOverdue() -> Bool {
        let now = NIODeadline.now()
        switch phase {
        case .waiting(let since, let first):
            if first { return now - since > .seconds(limits.header) }
            if let started = bytes.firstSinceMark { return now - started > .seconds(limits.header) }
            return now - since > .seconds(limits.idle)
        case .body(let waitedBefore, let receivedBefore):
            let silence = bytes.silence(now: now)
            if silence > .seconds(limits.body) { return true }
            let waited = bytes.waited + silence - waitedBefore
            let received = bytes.received - receivedBefore
            return waited > .seconds(limits.body)
                && received * 1_000_000_000 / max(1, waited.nanoseconds) < Int64(limits.minimumBodyRate)
        case .answering:
            guard let unwritableSince else { return false }
            return now - unwritableSince > .seconds(limits.write)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: phase = .body(waited: bytes.waited, received: bytes.received)
        case .body: break
        case .end: phase = .answering
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data), case .answering = phase { enterWaiting(first: false) }
        context.write(data, promise: promise)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        unwritableSince = context.channel.isWritable ? nil : (unwritableSince ?? .now())
        context.fireChannelWritabilityChanged()
    }
}

/// The front of a connection's pipeline: when bytes arrive, and how long the relay has
/// waited for them (from a read it asked for to the data). Touched on the connection's
/// event loop only.
final class ByteWatch: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// When the first bytes since the last ``mark()`` came: a request's start.
    private(set) var firstSinceMark: NIODeadline?
    /// Time spent waiting for data the relay asked for, over the connection's life (not
    /// counting a wait still going on: ``silence(now:)``).
    private(set) var waited: TimeAmount = .zero
    /// Bytes received over the connection's life.
    private(set) var received: Int64 = 0
    /// Since when a read the relay asked for has brought nothing; nil while none is asked.
    private var wantedSince: NIODeadline?

    /// Starts looking for the next request's first byte.
    func mark() { firstSinceMark = nil }

    /// How long the read asked for has brought nothing, at `now`.
    func silence(now: NIODeadline) -> TimeAmount { wantedSince.map { now - $0 } ?? .zero }

    func read(context: ChannelHandlerContext) {
        if wantedSince == nil { wantedSince = .now() }
        context.read()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let now = NIODeadline.now()
        if let wantedSince { waited = waited + (now - wantedSince) }
        wantedSince = nil
        received += Int64(unwrapInboundIn(data).readableBytes)
        if firstSinceMark == nil { firstSinceMark = now }
        context.fireChannelRead(data)
    }
}
