import Foundation

/// Whether `condition` holds within `seconds`, looked at every `interval` seconds (and once
/// more at the end).
///
/// For what a process does on its own time, such as a relay closing a connection at its
/// deadline: a fixed sleep before one look fails whenever a loaded machine runs that
/// process late, where the behaviour under test only says that it happens, not how soon.
public func eventually(within seconds: Double, every interval: Double = 0.1, _ condition: () throws -> Bool) rethrows -> Bool {
    let end = ProcessInfo.processInfo.systemUptime + seconds
    while ProcessInfo.processInfo.systemUptime < end {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: interval)
    }
    return try condition()
}
