import Foundation

/// A token bucket per key (an address, a signing key) in a table of bounded size: each key
/// may spend `burst` events at once and gets `perSecond` back a second.
///
/// The table never holds more than `maximumKeys` entries, so a flood of new keys costs
/// bounded memory. When it is full, keys whose buckets have refilled (idle ones) go first;
/// if none has, the half least recently seen go. A key dropped so starts full again: the
/// bound is on memory, and a flood from that many keys is the address limit's to meet.
public final class RateLimiter: @unchecked Sendable {
    private struct Bucket {
        var tokens: Double
        var seen: TimeInterval
    }

    private let burst: Double
    private let perSecond: Double
    private let maximumKeys: Int
    private var buckets: [[UInt8]: Bucket] = [:]
    private let lock = NSLock()

    /// A limiter of `burst` events at once and `perSecond` after, over at most
    /// `maximumKeys` keys.
    public init(burst: Int, perSecond: Double, maximumKeys: Int = 65536) {
        precondition(burst >= 1 && perSecond > 0 && maximumKeys >= 2)
        self.burst = Double(burst)
        self.perSecond = perSecond
        self.maximumKeys = maximumKeys
    }

    /// Spends one event for `key`; false when its bucket is empty.
    public func allow(_ key: [UInt8], now: TimeInterval = ProcessInfo.processInfo.systemUptime) -> Bool {
        lock.withLock {
            var bucket = buckets[key] ?? Bucket(tokens: burst, seen: now)
            bucket.tokens = min(burst, bucket.tokens + max(0, now - bucket.seen) * perSecond)
            bucket.seen = now
            let allowed = bucket.tokens >= 1
            if allowed { bucket.tokens -= 1 }
            if buckets[key] == nil, buckets.count >= maximumKeys { makeRoom(now: now) }
            buckets[key] = bucket
            return allowed
        }
    }

    /// Whether `key` has an event to spend now, without spending it.
    public func hasRoom(_ key: [UInt8], now: TimeInterval = ProcessInfo.processInfo.systemUptime) -> Bool {
        lock.withLock {
            guard let bucket = buckets[key] else { return true }
            return min(burst, bucket.tokens + max(0, now - bucket.seen) * perSecond) >= 1
        }
    }

    /// How many keys the table holds.
    public var count: Int { lock.withLock { buckets.count } }

    private func makeRoom(now: TimeInterval) {
        buckets = buckets.filter { $0.value.tokens + (now - $0.value.seen) * perSecond < burst }
        guard buckets.count >= maximumKeys else { return }
        let kept = buckets.sorted { $0.value.seen > $1.value.seen }.prefix(maximumKeys / 2)
        buckets = Dictionary(uniqueKeysWithValues: kept.map { ($0.key, $0.value) })
    }
}
