import Foundation

/// A small tmpfs in a mount namespace of the test's own, for tests of full and read-only
/// disks. Nothing is mounted where the rest of the machine can see it, and nothing is left
/// mounted when the test ends: the namespace lives as long as one `sleep` process, killed
/// on release.
///
/// Commands run inside the namespace with ``wrap(_:)`` (and ``VaultBinary/inside(_:)``);
/// the test itself reaches the same files from outside through ``outside(_:)``, the
/// namespace's own view of the file system under `/proc/PID/root`. Needs root (CI is).
public final class SmallDisk: @unchecked Sendable {
    /// The mount point, as commands in the namespace see it.
    public let path: String
    private let directory: TemporaryDirectory
    private let holder: BackgroundProcess

    /// Mounts `kibibytes` of tmpfs; `readOnly` remounts it read-only once `prepare` (a shell
    /// command run in it first) has put files there.
    public init(kibibytes: Int, readOnly: Bool = false, prepare: String = ":") throws {
        directory = TemporaryDirectory("vault-disk")
        path = directory.file("disk")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let script = "mount -t tmpfs -o size=\(kibibytes)k,mode=0755 tmpfs \"$0\" && cd \"$0\" && { \(prepare); } && "
            + (readOnly ? "mount -o remount,ro \"$0\" && " : "") + "echo mounted && exec sleep 3600"
        holder = try BackgroundProcess("/usr/bin/unshare", ["--mount", "--propagation", "private", "/bin/sh", "-c", script, path],
                                       environment: ProcessInfo.processInfo.environment, logPath: directory.file("holder.log"))
        try holder.waitFor("mounted")
    }

    deinit { holder.stop(SIGKILL) }

    /// Where the test reaches `inside` (a path in the namespace) from outside it.
    public func outside(_ inside: String) -> String { "/proc/\(holder.pid)/root" + inside }

    /// The arguments that run `executable ARGUMENTS` inside the namespace.
    public func wrap(_ executable: String, _ arguments: [String]) -> (String, [String]) {
        ("/usr/bin/nsenter", ["--target", String(holder.pid), "--mount", "--", executable] + arguments)
    }

    /// Fills the disk until at most `free` bytes are left for new data.
    public func fill(leaving free: Int = 0) throws {
        let filler = outside(path + "/filler")
        // O_CLOEXEC: tests run in parallel, and a child another test starts meanwhile would
        // otherwise inherit the filler's descriptor and keep its space after it is unlinked.
        let fd = open(filler, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw NSError(domain: "SmallDisk", code: Int(errno)) }
        defer { close(fd) }
        let block = [UInt8](repeating: 0x5A, count: 4096)
        while available > UInt64(free) {
            let count = block.withUnsafeBytes { write(fd, $0.baseAddress, min($0.count, Int(available) - free)) }
            if count <= 0 { break }
        }
    }

    /// Bytes free for new data.
    public var available: UInt64 {
        var info = statvfs()
        guard statvfs(outside(path), &info) == 0 else { return 0 }
        return UInt64(info.f_bavail) * UInt64(info.f_frsize)
    }

    /// The names in `folder` (a path in the namespace), without the filler.
    public func names(in folder: String? = nil) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: outside(folder ?? path))) ?? []).filter { $0 != "filler" }.sorted()
    }
}

extension VaultBinary {
    /// This binary, run inside `disk`'s mount namespace; its keystore files are read there.
    public func inside(_ disk: SmallDisk) -> VaultBinary {
        var copy = self
        copy.launcher = { disk.wrap($0, $1) }
        copy.fileRoot = disk.outside("")
        return copy
    }
}
