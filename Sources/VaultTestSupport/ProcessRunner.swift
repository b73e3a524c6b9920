import CVaultProcess
import Foundation

/// What a finished child process left behind.
public struct ProcessResult: Sendable {
    /// The exit status, or 128 + the signal number.
    public let status: Int32
    /// Everything written to standard output.
    public let stdout: String
    /// Everything written to standard error.
    public let stderr: String
    /// Standard output as bytes.
    public let stdoutBytes: [UInt8]
    /// The child's peak resident memory in KiB, sampled from /proc while it ran (0 where
    /// unknown). Not `ru_maxrss`: posix_spawn's child shares the parent's address space
    /// until exec, and Linux folds that address space's peak into the child's `ru_maxrss`.
    public var maximumResidentKiB: Int = 0
}

/// Runs programs the way a user's shell would, but in a new session: the child has no
/// controlling terminal, exactly as under CI, so every prompt must fail cleanly.
public enum ProcessRunner {
    /// Runs `executable` with `arguments`, feeding `stdin`, and waits for it.
    public static func run(
        _ executable: String, _ arguments: [String], stdin: [UInt8] = [],
        environment: [String: String]? = nil
    ) throws -> ProcessResult {
        let input = try Pipe.make(), output = try Pipe.make(), errors = try Pipe.make()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input.read, 0)
        posix_spawn_file_actions_adddup2(&actions, output.write, 1)
        posix_spawn_file_actions_adddup2(&actions, errors.write, 2)
        let pid = try spawn(executable, arguments, actions: &actions, environment: environment)
        for fd in [input.read, output.write, errors.write] { close(fd) }

        // Feed stdin from a thread while draining both outputs, so no pipe fills up.
        let writer = Thread {
            stdin.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let count = write(input.write, bytes.baseAddress! + offset, bytes.count - offset)
                    if count <= 0 { break }
                    offset += count
                }
            }
            close(input.write)
        }
        writer.start()
        var peak = 0
        let (out, err) = drain(output.read, errors.read) { peak = max(peak, highWaterKiB(pid)) }
        var result = ProcessResult(status: wait(pid), stdout: String(decoding: out, as: UTF8.self),
                                   stderr: String(decoding: err, as: UTF8.self), stdoutBytes: out)
        result.maximumResidentKiB = peak
        return result
    }

    static func spawn(
        _ executable: String, _ arguments: [String], actions: inout posix_spawn_file_actions_t,
        environment: [String: String]?
    ) throws -> pid_t {
        // The child gets 0, 1 and 2 and nothing else of this process: not the sockets and
        // files other tests hold open (a browser driver once got descriptors above 1023,
        // which select() cannot take), nor another child's pipe, whose end it would keep
        // open past that child's exit.
        let closing = vault_spawn_close_from(&actions, 3)
        guard closing == 0 else {
            throw NSError(domain: "ProcessRunner", code: Int(closing),
                          userInfo: [NSLocalizedDescriptionKey: "cannot run \(executable): \(String(cString: strerror(closing)))"])
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // POSIX_SPAWN_SETSID (glibc 2.26+) is a GNU extension Swift does not import.
        let spawnSetsid: Int16 = 0x80
        posix_spawnattr_setflags(&attributes, spawnSetsid)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let env = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + env).forEach { free($0) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, executable, &actions, &attributes, argv, env)
        guard status == 0 else {
            throw NSError(domain: "ProcessRunner", code: Int(status),
                          userInfo: [NSLocalizedDescriptionKey: "cannot run \(executable): \(String(cString: strerror(status)))"])
        }
        return pid
    }

    /// VmHWM, the peak resident memory of the process's current address space.
    static func highWaterKiB(_ pid: pid_t) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return 0 }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }

    static func wait(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// Reads both pipes to their end, calling `tick` at least every 20 ms.
    private static func drain(_ first: Int32, _ second: Int32, tick: () -> Void) -> ([UInt8], [UInt8]) {
        var buffers: [Int32: [UInt8]] = [first: [], second: []]
        var open = [first, second]
        var chunk = [UInt8](repeating: 0, count: 65536)
        while !open.isEmpty {
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard poll(&fds, nfds_t(fds.count), 20) >= 0 || errno == EINTR else { break }
            tick()
            for entry in fds where entry.revents != 0 {
                let count = read(entry.fd, &chunk, chunk.count)
                if count > 0 {
                    buffers[entry.fd]!.append(contentsOf: chunk[0..<count])
                } else if count == 0 || errno != EINTR {
                    close(entry.fd)
                    open.removeAll { $0 == entry.fd }
                }
            }
        }
        return (buffers[first]!, buffers[second]!)
    }
}

struct Pipe {
    let read: Int32
    let write: Int32

    static func make() throws -> Pipe {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            throw NSError(domain: "ProcessRunner", code: Int(errno))
        }
        // Close-on-exec, so a child gets only the ends dup2'ed onto 0, 1 and 2 (`spawn`
        // closes the rest in the child in any case, should another thread spawn in between).
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return Pipe(read: fds[0], write: fds[1])
    }
}
