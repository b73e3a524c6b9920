import Foundation

/// Runs a program with a pseudo-terminal as its controlling terminal, so tests can answer
/// its prompts on /dev/tty as a person would. Standard input, output and error stay pipes.
public final class TerminalSession {
    private let master: Int32
    /// Kept open until the end: with no slave open, reading the master fails with EIO, and the
    /// child may not have opened its end yet when the test starts reading.
    private let slave: Int32
    private let pid: pid_t
    private let stdoutRead: Int32
    private let stderrRead: Int32
    private var finished: ProcessResult?
    /// Everything the program wrote to the terminal so far, decoded whole (a character
    /// may arrive in two reads).
    public var transcript: String { String(decoding: output, as: UTF8.self) }
    private var output: [UInt8] = []
    /// The program's process id (to read /proc/PID while it runs).
    public var processID: pid_t { pid }

    /// With `standardErrorOnTerminal`, standard error is the terminal too (its output then
    /// shows in ``transcript``, and ``finish()`` returns none).
    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                standardErrorOnTerminal: Bool = false) throws {
        var masterFD: Int32 = 0, slaveFD: Int32 = 0
        guard openpty(&masterFD, &slaveFD, nil, nil, nil) == 0 else {
            throw NSError(domain: "TerminalSession", code: Int(errno))
        }
        let slaveName = String(cString: ttyname(slaveFD))
        let output = try Pipe.make(), errors = try Pipe.make(), input = try Pipe.make()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // In a new session, the first terminal opened without O_NOCTTY becomes the
        // controlling terminal: that is what /dev/tty then refers to.
        posix_spawn_file_actions_addopen(&actions, 9, slaveName, O_RDWR, 0)
        posix_spawn_file_actions_addclose(&actions, 9)
        posix_spawn_file_actions_adddup2(&actions, input.read, 0)
        posix_spawn_file_actions_adddup2(&actions, output.write, 1)
        if standardErrorOnTerminal {
            posix_spawn_file_actions_addopen(&actions, 2, slaveName, O_RDWR | O_NOCTTY, 0)
        } else {
            posix_spawn_file_actions_adddup2(&actions, errors.write, 2)
        }
        _ = fcntl(masterFD, F_SETFD, FD_CLOEXEC)
        _ = fcntl(slaveFD, F_SETFD, FD_CLOEXEC)
        pid = try ProcessRunner.spawn(executable, arguments, actions: &actions, environment: environment)
        for fd in [output.write, errors.write, input.read, input.write] { close(fd) }
        slave = slaveFD
        master = masterFD
        stdoutRead = output.read
        stderrRead = errors.read
    }

    deinit {
        if finished == nil { kill(pid, SIGKILL); _ = ProcessRunner.wait(pid) }
        close(master)
        close(slave)
        if finished == nil { close(stdoutRead); close(stderrRead) }
    }

    /// Reads the terminal until `text` appears (the `times`th time, for a prompt shown
    /// again). Fails after `timeout` seconds.
    public func expect(_ text: String, times: Int = 1, timeout: Double = 20) throws {
        let deadline = Date().addingTimeInterval(timeout)
        var chunk = [UInt8](repeating: 0, count: 4096)
        while transcript.components(separatedBy: text).count - 1 < times {
            let left = Int32(max(0, deadline.timeIntervalSinceNow) * 1000)
            var entry = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
            guard left > 0, poll(&entry, 1, left) > 0 else {
                throw NSError(domain: "TerminalSession", code: 1, userInfo: [
                    NSLocalizedDescriptionKey: "timed out waiting for \(text.debugDescription); terminal shows \(transcript.debugDescription)"])
            }
            let count = read(master, &chunk, chunk.count)
            guard count > 0 else {
                throw NSError(domain: "TerminalSession", code: 2, userInfo: [
                    NSLocalizedDescriptionKey: "terminal closed before \(text.debugDescription); it showed \(transcript.debugDescription)"])
            }
            output += chunk[0..<count]
        }
    }

    /// Once the program has ended (``finish()``): reads what it left on the terminal.
    public func readRest() {
        var chunk = [UInt8](repeating: 0, count: 4096)
        var entry = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
        while poll(&entry, 1, 0) > 0, entry.revents & Int16(POLLIN) != 0 {
            let count = read(master, &chunk, chunk.count)
            guard count > 0 else { return }
            output += chunk[0..<count]
        }
    }

    /// Types `line` and Enter.
    public func send(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(master, $0.baseAddress, $0.count) }
    }

    /// Types Ctrl-D: at the start of a line, the end of input.
    public func sendEndOfInput() {
        var byte: UInt8 = 4
        _ = write(master, &byte, 1)
    }

    /// Sends the program `signal` (SIGTERM, as systemd or a shell's kill would).
    public func signal(_ number: Int32) {
        if finished == nil { kill(pid, number) }
    }

    /// ``finish()``, but a program still running after `seconds` (waiting at a prompt that
    /// should never have been shown) is killed, so the test fails instead of hanging.
    public func finish(within seconds: Double) -> ProcessResult {
        let pid = self.pid
        let watchdog = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: watchdog)
        defer { watchdog.cancel() }
        return finish()
    }

    /// Waits for the program to exit and returns what it wrote to its pipes.
    public func finish() -> ProcessResult {
        if let finished { return finished }
        let out = Self.readAll(stdoutRead), err = Self.readAll(stderrRead)
        let result = ProcessResult(status: ProcessRunner.wait(pid), stdout: String(decoding: out, as: UTF8.self),
                                   stderr: String(decoding: err, as: UTF8.self), stdoutBytes: out)
        finished = result
        return result
    }

    private static func readAll(_ fd: Int32) -> [UInt8] {
        var all: [UInt8] = [], chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(fd, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            all.append(contentsOf: chunk[0..<count])
        }
        close(fd)
        return all
    }
}
