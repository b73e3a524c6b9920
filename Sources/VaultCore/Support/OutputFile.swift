import CVaultFile
import Foundation

/// A new file written front to back, with one positional write to fill in a reserved
/// prefix. Created at 0600 and never over an existing file; removed unless committed.
public final class OutputFile {
    /// The path.
    public let path: String
    private var fd: Int32
    private var committed = false

    /// Creates `path`, refusing an existing file unless `replace`, in which case the new
    /// content goes to a temporary name in the same directory and replaces the old file
    /// only at ``commit()``.
    ///
    /// With `hiddenUntilCommit` (for plaintext the user asked for), the file has no name at
    /// all until ``commit()``: it is an O_TMPFILE inode in the target directory, linked in at
    /// the end. A process killed part way (even by SIGKILL) then leaves nothing behind, not
    /// even a partial file. Where the file system lacks O_TMPFILE (vfat, NFS, CIFS), it is
    /// written under a temporary name beside the target and given the target's name at
    /// ``commit()``, so that the name asked for never holds part of the file; a process killed
    /// part way leaves that temporary file, which the next OutputFile of the same path
    /// removes (``removeLeftovers(of:)``).
    ///
    /// Errors name the file as `shownAs` (default: its path): a file of vault's own, such as a
    /// transient one in the keystore directory, is named by where it is, not by its name.
    ///
    /// A `durable` file (the default) is fsynced before ``commit()`` gives it its name, so a
    /// power cut leaves either no file or all of it. A file that is not durable (a plaintext
    /// that can be made again from what stays, Docs/DECISIONS.md "What is fsynced") is left
    /// to the kernel's own write-back: a power cut soon after its commit can leave it short
    /// or empty. Either way a process killed part way leaves no name behind. A file that
    /// replaces another is always durable: a power cut must not leave an empty file where a
    /// whole one was.
    public convenience init(path: String, replace: Bool = false, mode: mode_t = 0o600, hiddenUntilCommit: Bool = false,
                            durable: Bool = true, shownAs: String? = nil) throws(VaultError) {
        try self.init(path: path, replace: replace, mode: mode, hiddenUntilCommit: hiddenUntilCommit, durable: durable,
                      shownAs: shownAs, unnamedFiles: true)
    }

    /// With `unnamedFiles` false, as on a file system without O_TMPFILE (the tests' way to
    /// that path, as no such file system can be mounted here).
    init(path: String, replace: Bool, mode: mode_t, hiddenUntilCommit: Bool, durable: Bool, shownAs: String?,
         unnamedFiles: Bool) throws(VaultError) {
        self.path = path
        self.durable = durable || replace
        self.replace = replace
        finalPath = path
        let name = shownAs ?? path
        self.name = name
        let temporary = path + Self.leftoverMark + "\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        if replace || hiddenUntilCommit { Self.removeLeftovers(of: path) }
        var existing = stat()
        let exists = lstat(path, &existing) == 0
        // A directory cannot be replaced by a file: said now, not at the commit after all
        // the work (and, for a link, after its view is spent).
        if replace && exists && existing.st_mode & S_IFMT == S_IFDIR { throw .fileSystem(path: name, errno: EISDIR) }
        if hiddenUntilCommit {
            if !replace && exists { throw .fileExists(path: path) }
            let directory = PathText.directory(of: path)
            fd = unnamedFiles ? open(directory.isEmpty ? "." : directory, Self.temporaryFileFlag | O_WRONLY | O_CLOEXEC, mode) : -1
            if fd >= 0 {
                unnamed = true
                temporaryPath = replace ? temporary : nil
                return
            }
            // No O_TMPFILE on this file system: a named file, but not the target's name.
            temporaryPath = temporary
        } else {
            temporaryPath = replace ? temporary : nil
        }
        fd = open(temporaryPath ?? path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else {
            if errno == EEXIST { throw .fileExists(path: path) }
            throw .fileSystem(path: name, errno: errno)
        }
    }

    /// Whether ``commit()`` makes the bytes durable before the name.
    private let durable: Bool
    /// Whether ``commit()`` may replace a file of the target's name.
    private let replace: Bool
    /// What errors call the file.
    private let name: String
    private let finalPath: String
    private let temporaryPath: String?
    private var unnamed = false
    /// Linux's O_TMPFILE (`__O_TMPFILE | O_DIRECTORY`), a macro Swift does not import.
    private static let temporaryFileFlag: Int32 = 0o20000000 | O_DIRECTORY

    deinit {
        writeBack?.finish()
        if fd >= 0 { close(fd) }
        if !committed && !unnamed { unlink(temporaryPath ?? finalPath) }
    }

    /// Appends bytes.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(VaultError) {
        var offset = 0
        while offset < bytes.count {
            let count = Foundation.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw .fileSystem(path: name, errno: errno) }
            offset += count
        }
        wrote(through: appended + UInt64(bytes.count))
    }

    /// Bytes appended, how many of them the kernel was asked to start writing out, and how
    /// many to make durable.
    private var appended: UInt64 = 0
    private var writeBackStarted: UInt64 = 0
    private var flushed: UInt64 = 0
    /// Write-behind, started on each 8 MiB as it is written (``KernelHints``). Left to itself
    /// the kernel writes dirty pages out late (after seconds, or when memory runs short), so
    /// the disk would sit idle while vault computes and ``commit()``'s fsync would then write
    /// everything at once.
    static let writeBehind: UInt64 = 8 << 20
    /// ... and every 64 MiB, made durable. Starting write-back is not enough where the device
    /// keeps what it is sent in a volatile cache, as a virtual disk does in its host's page
    /// cache: the device then writes it only when fsync asks it to flush, all at the end.
    /// Measured on this project's virtual disk, writing 1 GiB at 900 MB/s in 64 KiB writes
    /// with write-back started every 8 MiB left 0.75-1.0 s for the final fsync (2.2 s in all);
    /// with an fdatasync every 64 MiB besides, 0.2 s (1.4 s in all, where writing the whole
    /// GiB into the page cache at once and then fsync took 1.3 s). Nothing waits for these
    /// flushes but the commit, which needs all of them anyway.
    static let flushEvery: UInt64 = 64 << 20

    /// Writes bytes at an offset already written (a reserved prefix).
    func write(_ bytes: [UInt8], at position: UInt64) throws(VaultError) {
        var failure: VaultError?
        bytes.withUnsafeBytes { bytes in
            do throws(VaultError) { try write(bytes, at: position) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Writes bytes at `position`, without moving the end ``write(_:)`` appends at. Threads
    /// may write disjoint stretches at once (``DealLanes``); ``wrote(through:)`` then says
    /// how far the file is whole.
    func write(_ bytes: UnsafeRawBufferPointer, at position: UInt64) throws(VaultError) {
        var done = 0
        while done < bytes.count {
            let count = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(position) + off_t(done))
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw .fileSystem(path: name, errno: errno) }
            done += count
        }
    }

    /// Records that every byte before `end` is written, for write-behind (one thread at a
    /// time, with `end` growing), and starts the window when it is full.
    func wrote(through end: UInt64) {
        appended = max(appended, end)
        guard durable, appended - writeBackStarted >= Self.writeBehind else { return }
        let hints = writeBack ?? KernelHints(fd: fd)
        writeBack = hints
        if appended - flushed >= Self.flushEvery {
            hints.flush()
            flushed = appended
        } else {
            hints.startWriteBack(writeBackStarted, appended - writeBackStarted)
        }
        writeBackStarted = appended
    }

    /// Write-behind requests, from the first full window on.
    private var writeBack: KernelHints?

    /// Flushes to disk (when durable), closes, and keeps the file.
    public func commit() throws(VaultError) {
        if let code = writeBack?.finish() { throw .fileSystem(path: name, errno: code) }
        guard !durable || fsync(fd) == 0 else { throw .fileSystem(path: name, errno: errno) }
        if unnamed {
            // Give the unnamed inode its name (or the temporary one, renamed over the old
            // file next). linkat refuses an existing name: O_EXCL's promise, kept to the end.
            let target = temporaryPath ?? finalPath
            guard linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, target, AT_SYMLINK_FOLLOW) == 0 else {
                if errno == EEXIST { throw .fileExists(path: path) }
                throw .fileSystem(path: name, errno: errno)
            }
            unnamed = false
        }
        close(fd)
        fd = -1
        if let temporaryPath {
            if replace {
                guard rename(temporaryPath, finalPath) == 0 else { throw .fileSystem(path: name, errno: errno) }
            } else {
                try Self.name(temporaryPath, as: finalPath, shownAs: name)
            }
        }
        committed = true
    }

    /// Gives `temporary` the name `target` unless a file has it: O_EXCL's promise, kept to the
    /// end, on file systems without O_TMPFILE. renameat2's RENAME_NOREPLACE where the file
    /// system has it, else a hard link (NFS), else a look and a rename (vfat and CIFS, which
    /// have neither: a file made at that name between the two is replaced).
    private static func name(_ temporary: String, as target: String, shownAs name: String) throws(VaultError) {
        if vault_rename_no_replace(temporary, target) == 0 { return }
        if errno == EEXIST { throw .fileExists(path: target) }
        if link(temporary, target) == 0 {
            unlink(temporary)
            return
        }
        if errno == EEXIST { throw .fileExists(path: target) }
        var info = stat()
        if lstat(target, &info) == 0 { throw .fileExists(path: target) }
        guard rename(temporary, target) == 0 else { throw .fileSystem(path: name, errno: errno) }
    }

    /// What a temporary name adds to the target's: `NAME.vault-PID-RANDOM`.
    static let leftoverMark = ".vault-"

    /// Removes the temporary files of `path` that a killed vault left (its process is gone):
    /// a whole plaintext when killed between its two renames, or part of one where the file
    /// system has no O_TMPFILE. Only a regular file of this user's is removed: another
    /// user's, and a running process's, stay. (A writer in another PID namespace or on
    /// another machine sharing the folder looks gone: two writers of one path already
    /// conflict, and the later commit fails in words.)
    static func removeLeftovers(of path: String) {
        let directory = PathText.directory(of: path)
        let prefix = (path.lastIndex(of: "/").map { String(path[path.index(after: $0)...]) } ?? path) + leftoverMark
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: directory.isEmpty ? "." : directory) else { return }
        for entry in entries where entry.hasPrefix(prefix) {
            let parts = entry.dropFirst(prefix.count).split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 2, let pid = Int32(parts[0]), pid > 0, UInt32(parts[1]) != nil, pid != getpid() else { continue }
            let leftover = directory.isEmpty ? entry : directory + "/" + entry
            var info = stat()
            guard lstat(leftover, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else { continue }
            if ProcessTable.isGone(pid) { unlink(leftover) }
        }
    }
}
