import Foundation

/// At most `limit` events per key in any sliding `window` of seconds.
final class RateLimiter: @unchecked Sendable {
    private let limit: Int
    private let window: TimeInterval
    private var events: [[UInt8]: [Date]] = [:]
    private let lock = NSLock()

    init(limit: Int, window: TimeInterval = 60) {
        self.limit = limit
        self.window = window
    }

    /// Records an event for `key` and tells whether it is allowed.
    func allow(_ key: [UInt8], now: Date = Date()) -> Bool {
        lock.withLock {
            var recent = (events[key] ?? []).filter { now.timeIntervalSince($0) < window }
            guard recent.count < limit else {
                events[key] = recent
                return false
            }
            recent.append(now)
            events[key] = recent
            return true
        }
    }
}
