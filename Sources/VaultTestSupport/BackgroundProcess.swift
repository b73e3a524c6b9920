import Foundation

/// A program left running while a test drives others, such as `vault serve`: its stdout and
/// stderr go to a log file the test can wait on; it is killed if the test forgets it.
public final class BackgroundProcess: @unchecked Sendable {
    /// The process id.
    public let pid: pid_t
    private let logPath: String
    private var status: Int32?

    public init(_ executable: String, _ arguments: [String], environment: [String: String], logPath: String) throws {
        self.logPath = logPath
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        pid = try ProcessRunner.spawn(executable, arguments, actions: &actions, environment: environment)
    }

    deinit { if status == nil { kill(pid, SIGKILL); _ = ProcessRunner.wait(pid) } }

    /// Everything it wrote so far.
    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Waits until the log matches `pattern` and returns the first capture group. The
    /// default wait is long: it costs only a failing test its time, and a loaded machine
    /// (CI runs every suite at once on two cores) starts processes many seconds late.
    @discardableResult
    public func waitFor(_ pattern: String, timeout: Double = 60) throws -> String {
        let regex = try NSRegularExpression(pattern: pattern)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let text = log
            if let match = regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) {
                let range = match.numberOfRanges > 1 ? match.range(at: 1) : match.range
                return String(text[Range(range, in: text)!])
            }
            var info: Int32 = 0
            if waitpid(pid, &info, WNOHANG) == pid {
                status = info
                throw NSError(domain: "BackgroundProcess", code: 1, userInfo: [NSLocalizedDescriptionKey: "exited before \(pattern): \(text)"])
            }
            usleep(20_000)
        }
        throw NSError(domain: "BackgroundProcess", code: 2, userInfo: [NSLocalizedDescriptionKey: "timed out waiting for \(pattern): \(log)"])
    }

    /// Waits for the process to end by itself; returns its exit status.
    @discardableResult
    public func wait() -> Int32 { stop(0) }

    /// Sends `signal` (0: none) and waits for the exit status.
    @discardableResult
    public func stop(_ signal: Int32 = SIGTERM) -> Int32 {
        if let status { return status }
        kill(pid, signal)
        let result = ProcessRunner.wait(pid)
        status = result
        return result
    }
}

extension VaultBinary {
    /// Starts `vault ARGUMENTS` in the background, logging to `log`.
    public func background(_ arguments: [String], log: String) throws -> BackgroundProcess {
        let (executable, all) = launcher(Self.path, arguments)
        return try BackgroundProcess(executable, all, environment: childEnvironment, logPath: log)
    }
}
