import Foundation

/// `$VAULT_HOME/serve.lock`: at most one `vault serve` a keystore.
///
/// A second serve on the same home must fail before it touches anything the first one
/// owns: it would otherwise remove the running serve's agent socket on its way to finding
/// the port taken, and unlocked keys and waiting requests would seem gone. The lock is
/// `flock(2)` on an open file, so the kernel drops it when its holder exits, however it
/// exits (kill -9 included); the file keeps the holder's pid, to name it.
public final class ServeLock: @unchecked Sendable {
    private let fd: Int32

    private init(fd: Int32) { self.fd = fd }

    deinit { close(fd) }

    /// Takes the lock of `home`, or throws ``VaultError/alreadyServing(pid:)`` naming the
    /// serve that holds it.
    public static func acquire(_ home: VaultHome) throws(VaultError) -> ServeLock {
        let path = home.directory + "/serve.lock"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .fileSystem(path: path, reason: String(cString: strerror(errno))) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let busy = errno == EWOULDBLOCK
            let reason = String(cString: strerror(errno))
            defer { close(fd) }
            guard busy else { throw .fileSystem(path: path, reason: reason) }
            throw .alreadyServing(pid: readPID(fd))
        }
        let pid = Array("\(getpid())\n".utf8)
        guard ftruncate(fd, 0) == 0, pid.withUnsafeBytes({ pwrite(fd, $0.baseAddress, $0.count, 0) }) == pid.count else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw .fileSystem(path: path, reason: reason)
        }
        return ServeLock(fd: fd)
    }

    /// The pid the holder wrote, if it wrote one yet.
    private static func readPID(_ fd: Int32) -> Int32? {
        var bytes = [UInt8](repeating: 0, count: 16)
        let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        return Int32(String(decoding: bytes[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
