import Foundation

/// The wall clock of vault's protocols: when an emergency wait ends, when a request or a
/// relay's message expires, the time a request is signed at and checked against.
///
/// Durations of the machine's own work (a network deadline, a progress line) stay on the
/// system's clocks; this is the clock the other side of a protocol shares.
///
/// **The test clock.** A debug build (the one the tests drive) started with
/// `VAULT_TEST_CLOCK=FILE` adds the seconds written in FILE to the time, read at every look:
/// a test moves every process of its world (holders, serves, relays) forward together, so an
/// emergency wait of a minute or a request's lifetime passes in milliseconds. A release build
/// has no such switch: it is compiled out, so that nothing in a holder's environment moves
/// the clock its emergency waits are kept by (a holder could still set the system's clock:
/// the wait protects the dealer against a contact, not against the holder, SECURITY.md).
public enum VaultClock {
    /// The time now.
    public static func now() -> Date {
        #if DEBUG
        if let offset = testOffset() { return Date().addingTimeInterval(offset) }
        #endif
        return Date()
    }

    /// The time now, in whole seconds since 1970.
    public static func seconds() -> UInt64 { UInt64(now().timeIntervalSince1970) }

    /// Returns at `deadline` by this clock, or when the task is cancelled.
    public static func sleep(until deadline: Date) async {
        #if DEBUG
        if testOffset() != nil {
            // The file may move the clock at any moment: look again every tenth of a second.
            // One look a turn: between two looks the file may move the clock past the deadline.
            while !Task.isCancelled {
                let left = deadline.timeIntervalSince(now())
                guard left > 0 else { break }
                try? await Task.sleep(nanoseconds: UInt64(min(0.1, left) * 1e9))
            }
            return
        }
        #endif
        let left = deadline.timeIntervalSinceNow
        if left > 0 { try? await Task.sleep(nanoseconds: UInt64(min(left, 86_400 * 366) * 1e9)) }
    }

    #if DEBUG
    private static let testClockFile = ProcessInfo.processInfo.environment["VAULT_TEST_CLOCK"].flatMap { $0.isEmpty ? nil : $0 }

    /// The seconds the test clock's file adds, or nil without one; a file that cannot be
    /// read as a number adds nothing.
    private static func testOffset() -> TimeInterval? {
        guard let testClockFile else { return nil }
        guard let text = try? String(contentsOfFile: testClockFile, encoding: .utf8) else { return 0 }
        return TimeInterval(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }
    #endif
}
