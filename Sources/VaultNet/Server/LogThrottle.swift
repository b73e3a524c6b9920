import Foundation

/// Log lines that anyone who can connect may cause at will (a failed handshake, an untrusted
/// key, a rate-limited request), at most one per kind per interval. The next line of a kind
/// says how many were held back, so a flood shows in the log as a count, not as the flood.
final class LogThrottle: @unchecked Sendable {
    private let interval: TimeInterval
    private let log: @Sendable (String) -> Void
    private let lock = NSLock()
    private var kinds: [String: (last: Date, held: Int)] = [:]

    init(interval: TimeInterval = 10, log: @escaping @Sendable (String) -> Void) {
        self.interval = interval
        self.log = log
    }

    /// Logs `line` unless a line of `kind` was logged within the interval.
    func note(_ kind: String, _ line: @autoclosure () -> String, now: Date = Date()) {
        let held = lock.withLock { () -> Int? in
            let state = kinds[kind] ?? (.distantPast, 0)
            guard now.timeIntervalSince(state.last) >= interval else {
                kinds[kind] = (state.last, state.held + 1)
                return nil
            }
            kinds[kind] = (now, 0)
            return state.held
        }
        guard let held else { return }
        log(held == 0 ? line() : "\(line()) (and \(held) more like it before)")
    }
}
