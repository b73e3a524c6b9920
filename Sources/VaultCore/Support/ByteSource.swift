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
