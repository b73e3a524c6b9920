import Foundation

/// Something to read a stream from, a buffer at a time.
public protocol ByteSource {
    /// Reads up to `buffer.count` bytes; returns 0 only at the end.
    mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int
}

extension ByteSource {
    /// Reads exactly `count` bytes, or fewer only at the end.
    public mutating func readFully(_ count: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        let filled = try out.withUnsafeMutableBytes { try fill($0) }
        return filled == count ? out : Array(out[0..<filled])
    }

    /// Reads to the end, handing `body` each read of at most `size` bytes.
    public mutating func forEachChunk(of size: Int = 1 << 16, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        var buffer = [UInt8](repeating: 0, count: size)
        while true {
            let count = try buffer.withUnsafeMutableBytes { try read(into: $0) }
            if count == 0 { return }
            try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
        }
    }

    /// Reads until `buffer` is full or the source ends; returns the bytes read.
    mutating func fill(_ buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        var filled = 0
        while filled < buffer.count {
            let got = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
            if got == 0 { break }
            filled += got
        }
        return filled
    }
}

/// A file descriptor read to its end: a file, a pipe, standard input.
public final class FileSource: ByteSource {
    fileprivate let fd: Int32
    private let owned: Bool
    /// The path shown in errors.
    public let path: String

    /// Opens `path` for reading.
    public init(path: String) throws(VaultError) {
        fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .fileSystem(path: path, errno: errno) }
        owned = true
        self.path = path
        var info = stat()
        if fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFDIR {
            close(fd)
            throw .fileSystem(path: path, errno: EISDIR)
        }
        // A regular file is expected to stay as it was while it is read (files in /proc
        // claim 0 bytes and are read as streams).
        if info.st_mode & S_IFMT == S_IFREG && info.st_size > 0 { openedSize = UInt64(info.st_size) }
        // Read front to back once: the kernel may read further ahead.
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL)
    }

    /// The size of a regular file when it was opened; nil for streams.
    private var openedSize: UInt64?
    private var consumed: UInt64 = 0
    /// Bytes read so far.
    public var position: UInt64 { consumed }
    /// How far the kernel was asked to read ahead.
    private var prefetched: UInt64 = 0
    /// The stretch asked for at a time, when half of the one before is read.
    static let readAhead: UInt64 = 16 << 20

    /// Reads an open descriptor (a pipe's read end), closing it when released.
    public init(fileDescriptor: Int32, path: String) {
        fd = fileDescriptor
        owned = true
        self.path = path
    }

    /// Reads standard input.
    public init(standardInput: ()) {
        fd = STDIN_FILENO
        owned = false
        path = "standard input"
    }

    deinit {
        hints?.finish()
        if owned { close(fd) }
    }

    /// Read-ahead requests, from the first on.
    private var hints: KernelHints?

    /// The file's size, when it is a regular file.
    public var size: UInt64? {
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        return UInt64(info.st_size)
    }

    /// Reads the next bytes. A regular file that shrinks or grows while it is read is
    /// refused: what was read is then neither the old content nor the new one, and a secret
    /// shared from it would silently not be the file the user meant.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        if openedSize != nil && consumed + Self.readAhead / 2 >= prefetched {
            // Read-ahead: ask the kernel for the next stretch now, without waiting, so the
            // disk reads while vault computes. The kernel's own read-ahead (a few hundred KiB)
            // left the disk idle between reads of pieces read side by side: measured on this
            // disk, recovering 1 GiB took twice what reading the pieces and writing the
            // output at once took.
            prefetch(Self.readAhead, at: prefetched)
            prefetched += Self.readAhead
        }
        while true {
            let count = Foundation.read(fd, buffer.baseAddress, buffer.count)
            if count >= 0 {
                consumed += UInt64(count)
                if let openedSize, count == 0 ? consumed < openedSize : consumed > openedSize {
                    throw VaultError.fileSystem(path: path, reason: "it changed size while it was being read")
                }
                return count
            }
            if errno != EINTR { throw VaultError.fileSystem(path: path, errno: errno) }
        }
    }
}

extension FileSource {
    /// Reads `buffer.count` bytes at `position` (from the file's start) without moving the
    /// stream's position: threads may read at once (``RecoveryLanes``). Throws
    /// ``VaultError/truncated(what:)`` naming `what` when the file ends first.
    func read(at position: UInt64, into buffer: UnsafeMutableRawBufferPointer, what: String) throws {
        var done = 0
        while done < buffer.count {
            let count = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(position) + off_t(done))
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw VaultError.fileSystem(path: path, errno: errno) }
            guard count > 0 else { throw VaultError.truncated(what: what) }
            done += count
        }
    }

    /// Asks the kernel to read `length` bytes at `position` ahead, without waiting
    /// (``KernelHints``). One thread at a time.
    func prefetch(_ length: UInt64, at position: UInt64) {
        let hints = hints ?? KernelHints(fd: fd)
        self.hints = hints
        hints.readAhead(length, at: position)
    }

    /// A file read from `offset` on.
    public static func skipping(_ offset: Int, of path: String) throws -> FileSource {
        let source = try FileSource(path: path)
        try source.skip(UInt64(offset))
        return source
    }

    /// Reads and drops the next `count` bytes.
    func skip(_ count: UInt64) throws {
        var skipped: UInt64 = 0
        var buffer = [UInt8](repeating: 0, count: Int(min(max(count, 1), 65536)))
        while skipped < count {
            let got = try buffer.withUnsafeMutableBytes { try read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<Int(min(UInt64($0.count), count - skipped))])) }
            guard got > 0 else { throw VaultError.truncated(what: path) }
            skipped += UInt64(got)
        }
    }
}

/// Bytes in memory, read as a stream.
public struct BytesSource: ByteSource {
    private let bytes: [UInt8]
    private var offset = 0

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let count = min(buffer.count, bytes.count - offset)
        bytes.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + offset, byteCount: count) }
        offset += count
        return count
    }
}

/// A secret in locked memory, read as a stream (a shared key's 32 bytes).
public struct SecureBytesSource: ByteSource {
    private let bytes: SecureBytes
    private var offset = 0

    public init(_ bytes: SecureBytes) { self.bytes = bytes }

    public mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let count = min(buffer.count, bytes.count - offset)
        bytes.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + offset, byteCount: count) }
        offset += count
        return count
    }
}

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
    /// even a partial file. Where the file system lacks O_TMPFILE, it falls back to the named
    /// file, removed on failure.
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
    public init(path: String, replace: Bool = false, mode: mode_t = 0o600, hiddenUntilCommit: Bool = false,
                durable: Bool = true, shownAs: String? = nil) throws(VaultError) {
        self.path = path
        self.durable = durable || replace
        finalPath = path
        let name = shownAs ?? path
        self.name = name
        if replace {
            temporaryPath = path + ".vault-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        } else {
            temporaryPath = nil
        }
        if hiddenUntilCommit {
            var info = stat()
            if !replace && lstat(path, &info) == 0 { throw .fileExists(path: path) }
            let directory = PathText.directory(of: path)
            fd = open(directory.isEmpty ? "." : directory, Self.temporaryFileFlag | O_WRONLY | O_CLOEXEC, mode)
            if fd >= 0 {
                unnamed = true
                return
            }
        }
        fd = open(temporaryPath ?? path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else {
            if errno == EEXIST { throw .fileExists(path: path) }
            throw .fileSystem(path: name, errno: errno)
        }
    }

    /// Whether ``commit()`` makes the bytes durable before the name.
    private let durable: Bool
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
        if let temporaryPath, rename(temporaryPath, finalPath) != 0 {
            throw .fileSystem(path: name, errno: errno)
        }
        committed = true
    }
}
