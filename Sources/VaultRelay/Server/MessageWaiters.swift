import Foundation
import NIOCore

/// The requests waiting in `GET /v1/messages?wait=S` (Docs/RELAY.md, "Waiting for
/// messages"), by their caller's key in hex. A message finished for a recipient wakes that
/// recipient's waiters at once; they look again and answer.
///
/// Bounded, as every waiter holds a connection: at most ``perKey`` per caller key and
/// ``total`` in all. A request over either is answered at once, as without `wait`. A waiter
/// leaves the table when it is woken, when its time is up, when its connection closes and
/// when the relay shuts down, so nothing stays behind a request.
final class MessageWaiters: @unchecked Sendable {
    /// Waiting requests one key may have. A client watches a relay with one; a few leave
    /// room for a second program of the same identity.
    static let perKey = 4
    /// Waiting requests in all.
    static let total = 1024
    /// Waiting requests of guests (keys in no group here, waiting for the answers to what
    /// they left in the guest box): one a key, and these many in all, so that fresh keys,
    /// which cost nothing, cannot take the members' slots.
    static let guests = 64

    private enum Slot {
        /// Registered before its look at the store, so that a message finished during the look wakes it.
        case registered(key: String)
        case waiting(key: String, CheckedContinuation<Bool, Never>)
        /// Ended before it waited: woken by a message (true) or not.
        case ended(Bool)
    }

    private let lock = NSLock()
    private var slots: [UInt64: Slot] = [:]
    private var byKey: [String: Set<UInt64>] = [:]
    private var occupied = 0
    private var guestSlots: Set<UInt64> = []
    private var nextID: UInt64 = 0
    private var closed = false

    /// Runs `list` until it finds something, waiting between looks for a message to `key`,
    /// for at most `seconds`, while `connection` is open, and once more at the end. Returns
    /// the last look's result: empty only when the time is up, the client left, the relay
    /// is shutting down, or `key` or the relay has no waiter to spare (then at once).
    /// A `guest` waits in the guests' slots (``guests``).
    func poll<T: Collection>(for key: String, seconds: Int, connection: any Channel, guest: Bool = false,
                             _ list: () async throws -> T) async throws -> T {
        let deadline = NIODeadline.now() + .seconds(Int64(seconds))
        while true {
            let id = register(key, guest: guest)
            let listed: T
            do {
                listed = try await list()
            } catch {
                if let id { leave(id) }
                throw error
            }
            guard let id else { return listed }
            guard listed.isEmpty, NIODeadline.now() < deadline, connection.isActive else {
                leave(id)
                return listed
            }
            // Woken by a message: look again. A message for the key that this look does not
            // list (in a group the caller has left, or another relay process's wake-up that
            // came late) does not end the wait.
            guard await sleep(id, until: deadline, connection: connection) else {
                // The time is up, or the relay is stopping: one last look, as a list without
                // `wait` would take, in case a wake-up was missed. Not for a client gone.
                return Task.isCancelled || !connection.isActive ? listed : try await list()
            }
        }
    }

    /// Wakes the waiters of these keys (hex): a message for them was finished.
    func wake(_ keys: some Sequence<String>) {
        let woken = lock.withLock { keys.flatMap { byKey[$0] ?? [] }.compactMap { resolve($0, woken: true) } }
        for continuation in woken { continuation.resume(returning: true) }
    }

    /// Wakes every waiter, to look again: a wake-up may have been missed.
    func wakeAll() {
        let woken = lock.withLock { Array(slots.keys).compactMap { resolve($0, woken: true) } }
        for continuation in woken { continuation.resume(returning: true) }
    }

    /// Ends every wait, and takes no more: the relay is shutting down. Each waiter answers
    /// with what it found.
    func close() {
        let ended = lock.withLock {
            closed = true
            return Array(slots.keys).compactMap { resolve($0, woken: false) }
        }
        for continuation in ended { continuation.resume(returning: false) }
    }

    // MARK: One waiter

    /// A slot for `key`, or nil when it or the relay has none to spare.
    private func register(_ key: String, guest: Bool) -> UInt64? {
        lock.withLock {
            guard !closed, occupied < Self.total, byKey[key, default: []].count < (guest ? 1 : Self.perKey) else { return nil }
            guard !guest || guestSlots.count < Self.guests else { return nil }
            nextID += 1
            if guest { guestSlots.insert(nextID) }
            slots[nextID] = .registered(key: key)
            byKey[key, default: []].insert(nextID)
            occupied += 1
            return nextID
        }
    }

    /// Waits until the waiter is woken (true), or its deadline passes, its connection
    /// closes or its task is cancelled (false).
    private func sleep(_ id: UInt64, until deadline: NIODeadline, connection: any Channel) async -> Bool {
        let loop = connection.eventLoop
        let timer = loop.scheduleTask(deadline: deadline) { self.end(id) }
        // A client gone, or going (it closed its side), ends its wait at once, and frees its
        // slot for the list it asks next. (Noticed only at a look each second, a client that
        // hung up and asked again found its key's slots taken by its own lists, and was
        // answered at once.)
        loop.execute { ClientDeparture.watch(connection, waiter: id) { self.end(id) } }
        defer {
            timer.cancel()
            loop.execute { ClientDeparture.forget(connection, waiter: id) }
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let outcome: Bool? = lock.withLock {
                    switch slots[id] {
                    case .registered(let key):
                        slots[id] = .waiting(key: key, continuation)
                        return nil
                    case .ended(let woken):
                        slots[id] = nil
                        return woken
                    case .waiting, nil:
                        return false
                    }
                }
                if let outcome { continuation.resume(returning: outcome) }
            }
        } onCancel: {
            end(id)
        }
    }

    /// Ends a waiter in ``sleep`` without a message: its time is up, its connection closed,
    /// or its task was cancelled.
    private func end(_ id: UInt64) {
        lock.withLock { resolve(id, woken: false) }?.resume(returning: false)
    }

    /// Takes a waiter that will not sleep out of the table, whatever its state.
    private func leave(_ id: UInt64) {
        lock.withLock {
            _ = resolve(id, woken: false)
            slots[id] = nil
        }
    }

    /// Frees the waiter's slot, under the lock. Returns its continuation to resume (outside
    /// the lock) when it was waiting; one not waiting yet keeps its outcome for ``sleep``.
    private func resolve(_ id: UInt64, woken: Bool) -> CheckedContinuation<Bool, Never>? {
        let key: String, continuation: CheckedContinuation<Bool, Never>?
        switch slots[id] {
        case .registered(let registered):
            key = registered
            continuation = nil
            slots[id] = .ended(woken)
        case .waiting(let waiting, let waiter):
            key = waiting
            continuation = waiter
            slots[id] = nil
        case .ended, nil:
            return nil
        }
        byKey[key]?.remove(id)
        if byKey[key]?.isEmpty == true { byKey[key] = nil }
        guestSlots.remove(id)
        occupied -= 1
        return continuation
    }
}

/// Notes that a client closed its side of its connection, or the connection closed, and
/// ends the waiting list on it then. Hummingbird keeps half-closed connections open, to
/// answer a client that sent its request and then closed its side, so a connection whose
/// client went away stays active until the relay writes to it; for a waiting list, that
/// could be its whole wait.
final class ClientDeparture: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    /// Both read and written on the connection's event loop only.
    private var hasLeft = false
    private var waiter: (id: UInt64, end: @Sendable () -> Void)?

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .inputClosed = event as? ChannelEvent { left() }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        left()
        context.fireChannelInactive()
    }

    private func left() {
        hasLeft = true
        let ending = waiter
        waiter = nil
        ending?.end()
    }

    /// Calls `end` once the client of `connection` leaves, at once if it has, unless
    /// ``forget(_:waiter:)`` comes first for the same waiter. On the connection's event loop.
    static func watch(_ connection: any Channel, waiter id: UInt64, end: @escaping @Sendable () -> Void) {
        connection.eventLoop.preconditionInEventLoop()
        let handler = try? connection.pipeline.syncOperations.handler(type: ClientDeparture.self)
        if !connection.isActive || handler?.hasLeft == true {
            end()
        } else if let handler {
            handler.waiter = (id, end)
        } else {
            // Not on a connection of the relay's pipeline: ended at its close, at least.
            connection.closeFuture.whenComplete { _ in end() }
        }
    }

    /// Forgets the waiter `id` of `connection`: its wait is over. On the connection's event loop.
    static func forget(_ connection: any Channel, waiter id: UInt64) {
        connection.eventLoop.preconditionInEventLoop()
        guard let handler = try? connection.pipeline.syncOperations.handler(type: ClientDeparture.self),
              handler.waiter?.id == id else { return }
        handler.waiter = nil
    }
}
