import NIOCore
import Synchronization

/// The accept loop of a listening channel (the LAN server's, the agent's): each connection
/// accepted is given to `accept`, whose work runs in a task of its own, until the task that
/// runs the loop is cancelled.
///
/// A server's channels are bound to yield plain `Channel`s (``SecureChannel/accepted(_:)``),
/// each wrapped for async use only in the task that serves it (``SecureChannel/adopt(_:)``).
/// NIO hands accepted connections over through a buffer, and an async wrapper dropped
/// without `executeThenClose` traps the whole process ("Deinited NIOAsyncWriter without
/// calling finish()", swift-nio#2637): one waiting in that buffer when the server stopped,
/// or arriving just after, crashed a serve stopped while connections came in (and
/// vault-bench, which stops servers at once). A plain channel dropped traps nothing.
/// Even so, a cancel here does not drop the buffer: it closes the listening channel, whose
/// stream yields what it held and ends; each connection yielded after the cancel is closed
/// unserved, and the work under way is then cancelled.
enum AcceptLoop {
    /// Accepts on `server` until cancelled; `accept` is called in accept order and returns
    /// the connection's work.
    static func run(_ server: NIOAsyncChannel<Channel, Never>,
                    accept: @escaping @Sendable (Channel) -> @Sendable () async -> Void) async throws {
        let stopping = StopFlag()
        // Not a child task: the caller's cancellation must not reach the iteration.
        let accepting = Task {
            try await withThrowingDiscardingTaskGroup { group in
                try await server.executeThenClose { connections in
                    for try await connection in connections {
                        if stopping.isSet {
                            connection.close(promise: nil)
                        } else {
                            let work = accept(connection)
                            group.addTask { await work() }
                        }
                    }
                }
                group.cancelAll()
            }
        }
        try await withTaskCancellationHandler {
            try await accepting.value
        } onCancel: {
            stopping.set()
            server.channel.close(promise: nil)
        }
    }
}

/// Set once, read from any thread.
private final class StopFlag: Sendable {
    private let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
    func set() { value.withLock { $0 = true } }
}
