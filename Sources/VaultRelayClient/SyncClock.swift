import Foundation

/// Where the time of object sync goes, for `vault-bench --sync` (Grouper's figure 6.1 split:
/// data sync, secret sharing, network). A measuring task sets ``current`` for the calls it
/// times; everywhere else it is nil and measuring costs one task-local read.
public final class SyncClock: @unchecked Sendable {
    /// A part of a sync.
    public enum Phase: String, CaseIterable, Sendable {
        /// Writing objects into the keystore: each a sealed item and a signed change.
        case put
        /// Sealing an object message to its recipients (one-time key, boxes, secretstream, signature).
        case seal
        /// Storing a message on the group's relays.
        case upload
        /// Fetching a message from a relay, checking it on the way.
        case download
        /// Opening a message's boxes and body.
        case open
        /// Applying its changes to the keystore.
        case apply
        /// Handing the app what changed: opening items received while locked, and each value.
        case deliver
    }

    /// The clock of the calls the current task makes, if it is measuring.
    @TaskLocal public static var current: SyncClock?

    private let lock = NSLock()
    private var totals: [Phase: Duration] = [:]

    /// A clock at zero.
    public init() {}

    /// Time spent in `phase` so far.
    public subscript(_ phase: Phase) -> Duration { lock.withLock { totals[phase] ?? .zero } }

    /// Adds `duration` to `phase`.
    public func add(_ phase: Phase, _ duration: Duration) {
        lock.withLock { totals[phase, default: .zero] += duration }
    }

    /// Runs `body`, adding its time to `phase` when the task is measuring.
    public static func measure<T>(_ phase: Phase, _ body: () throws -> T) rethrows -> T {
        guard let clock = current else { return try body() }
        let start = ContinuousClock.now
        defer { clock.add(phase, ContinuousClock.now - start) }
        return try body()
    }

    /// Runs `body`, adding its time to `phase` when the task is measuring.
    public static func measure<T>(_ phase: Phase, _ body: () async throws -> T) async rethrows -> T {
        guard let clock = current else { return try await body() }
        let start = ContinuousClock.now
        defer { clock.add(phase, ContinuousClock.now - start) }
        return try await body()
    }
}
