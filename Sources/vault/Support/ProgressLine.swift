import Foundation
import VaultCore

/// Progress of long work on standard error: one line, redrawn in place, with what is being
/// done, bytes done of the total, the rate and the time left.
///
/// Shown only when standard error is a terminal and `--quiet` was not given, and only once
/// the work has lasted half a second: a quick command prints nothing extra, and a pipe or a
/// log file never receives carriage returns. Other lines for standard error go through
/// ``Terminal/standardError(_:)``, which clears the line first; the next tick redraws it.
enum ProgressLine {
    /// False under `--quiet`.
    nonisolated(unsafe) static var isEnabled = true

    /// Starts showing `meters` under `title`, in place of any line shown before.
    static func show(_ title: String, _ meters: [ProgressMeter]) {
        guard isEnabled, Terminal.lines == nil, isatty(STDERR_FILENO) == 1, !meters.isEmpty else { return }
        lock.withLock {
            current = Work(title: title, meters: meters, started: Date())
            guard timer == nil else { return }
            let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "vault.progress"))
            timer.schedule(deadline: .now() + .milliseconds(100), repeating: .milliseconds(100))
            timer.setEventHandler { ProgressLine.tick() }
            timer.resume()
            Self.timer = timer
        }
    }

    /// Stops showing progress and clears the line.
    static func end() {
        // A recovery run for another command (Terminal.lines) showed nothing here.
        guard Terminal.lines == nil else { return }
        lock.withLock {
            timer?.cancel()
            timer = nil
            current = nil
            erase()
        }
    }

    /// Runs `body` (which writes to the terminal) with the line cleared; it is drawn again
    /// at the next tick. For a quick write only: the lock is held throughout.
    static func clearing<T>(_ body: () throws -> T) rethrows -> T {
        try lock.withLock {
            erase()
            return try body()
        }
    }

    /// Runs `body` (a question that waits for the person) with the line cleared and not
    /// redrawn until it returns. The lock is not held while it waits: other threads'
    /// lines (vault serve's log) must never wait for someone to answer.
    static func pausing<T>(_ body: () throws -> T) rethrows -> T {
        lock.withLock {
            paused += 1
            erase()
        }
        defer { lock.withLock { paused -= 1 } }
        return try body()
    }

    private struct Work {
        let title: String
        let meters: [ProgressMeter]
        let started: Date
    }

    /// Recursive: a line written while the line is cleared (a prompt's details) clears again.
    private static let lock = NSRecursiveLock()
    nonisolated(unsafe) private static var current: Work?
    nonisolated(unsafe) private static var timer: DispatchSourceTimer?
    nonisolated(unsafe) private static var drawn = false
    /// Questions being asked (``pausing(_:)``): no line is drawn meanwhile.
    nonisolated(unsafe) private static var paused = 0

    private static func tick() {
        lock.withLock {
            guard let work = current, paused == 0 else { return }
            let elapsed = Date().timeIntervalSince(work.started)
            guard elapsed >= 0.5 else { return }
            let line = render(work, elapsed: elapsed, width: terminalWidth())
            write("\r" + line + "\u{1B}[K")
            drawn = true
        }
    }

    private static func erase() {
        guard drawn else { return }
        write("\r\u{1B}[K")
        drawn = false
    }

    private static func write(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Foundation.write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }

    private static func terminalWidth() -> Int {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }

    /// `title  [alice 40% · bob 100%  ]12.0 MiB / 30.0 MiB  40%  95.1 MB/s  0:02 left`,
    /// cut to the terminal's width (a wrapped line could not be redrawn in place).
    static func render(_ work: (title: String, meters: [ProgressMeter]), elapsed: TimeInterval, width: Int, color: Bool) -> String {
        let done = work.meters.reduce(UInt64(0)) { $0 + $1.completed }
        let total = work.meters.reduce(UInt64(0)) { $0 + $1.expected }
        var parts: [String] = []
        if work.meters.count > 1 {
            parts.append(work.meters.map { "\(TerminalText.escaped($0.name)) \(percent($0.completed, of: $0.expected))" }
                .joined(separator: " · "))
        }
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        if total > 0 {
            parts.append("\(ByteCount.text(done)) / \(ByteCount.text(total))")
            parts.append(percent(done, of: total))
        } else {
            parts.append(ByteCount.text(done))
        }
        parts.append(ByteCount.rate(rate))
        if total > done, rate > 0 { parts.append("\(duration(Double(total - done) / rate)) left") }
        let title = color ? "\u{1B}[1m\(work.title)\u{1B}[0m" : work.title
        let text = parts.joined(separator: "  ")
        let room = width - 1 - work.title.count - 2
        return title + "  " + (text.count > room ? String(text.prefix(max(0, room))) : text)
    }

    private static func render(_ work: Work, elapsed: TimeInterval, width: Int) -> String {
        let noColor = ProcessInfo.processInfo.environment["NO_COLOR"].map { !$0.isEmpty } ?? false
        return render((work.title, work.meters), elapsed: elapsed, width: width, color: !noColor)
    }

    private static func percent(_ done: UInt64, of total: UInt64) -> String {
        total == 0 ? "…" : "\(min(100, done * 100 / total))%"
    }

    private static func duration(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded(.up))
        return whole >= 3600 ? String(format: "%d:%02d:%02d", whole / 3600, whole / 60 % 60, whole % 60)
            : String(format: "%d:%02d", whole / 60, whole % 60)
    }
}
