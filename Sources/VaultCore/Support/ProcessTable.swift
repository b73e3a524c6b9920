import Foundation

/// Whether a process that named a file after itself is still running.
enum ProcessTable {
    /// True only when no process `pid` exists: one of another user's (EPERM) is alive, so
    /// its files are kept.
    static func isGone(_ pid: pid_t) -> Bool {
        kill(pid, 0) == -1 && errno == ESRCH
    }
}
