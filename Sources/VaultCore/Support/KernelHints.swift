import CVaultFile
import Dispatch
import Foundation

/// Requests to the kernel about one open file that may block and that nobody waits for:
/// start writing these dirty pages out, make what is written durable so far, read these
/// bytes ahead. They run in order on a serial queue (one of four, below), never on the
/// thread that asks.
///
/// Each of them submits I/O from the caller's context, and a disk slow to take requests
/// makes the caller wait for a free slot in its queue. Made inline, that wait stopped the
/// lane that emits in stripe order, and with it every lane.
///
/// The queues are few and shared (files take them in turn): a deal to 255 holders would
/// otherwise hold a thread in every one of 255 flushes at once. A file's requests keep
/// their order on its queue; a file may wait behind another's, which costs only time.
final class KernelHints: @unchecked Sendable {
    private let fd: Int32
    private let queue: DispatchQueue

    private static let queues = (0..<4).map { DispatchQueue(label: "vault.kernel-hints.\($0)") }
    private static let taking = NSLock()
    private nonisolated(unsafe) static var next = 0
    /// The errno of the first request that failed; read after ``finish()``.
    private var failure: Int32?

    /// Hints about `fd`, which must stay open until ``finish()`` returns.
    init(fd: Int32) {
        self.fd = fd
        queue = Self.taking.withLock {
            Self.next += 1
            return Self.queues[Self.next % Self.queues.count]
        }
    }

    /// Starts writing out bytes [start, start + length) (`sync_file_range(WRITE)`).
    func startWriteBack(_ start: UInt64, _ length: UInt64) {
        queue.async { [self] in
            if vault_start_write_back(fd, Int64(start), Int64(length)) != 0 { failed(errno) }
        }
    }

    /// Makes every byte written so far durable (`fdatasync`).
    ///
    /// A failure is kept for ``finish()``: since Linux 4.13 a write-back error is reported
    /// once to each open file, so the fsync that commits the file would not see an error
    /// this call took.
    func flush() {
        queue.async { [self] in
            while fdatasync(fd) != 0 {
                if errno != EINTR {
                    failed(errno)
                    return
                }
            }
        }
    }

    /// Asks for `length` bytes at `position` to be read ahead (`POSIX_FADV_WILLNEED`). A
    /// failed hint costs only speed.
    func readAhead(_ length: UInt64, at position: UInt64) {
        queue.async { [fd] in _ = posix_fadvise(fd, off_t(position), off_t(length), POSIX_FADV_WILLNEED) }
    }

    /// Waits until every request made so far has run, so that the descriptor may be closed
    /// without a late request reaching whatever file takes its number. Returns the errno of
    /// the first request that failed, if one did.
    @discardableResult
    func finish() -> Int32? {
        queue.sync { failure }
    }

    private func failed(_ code: Int32) {
        if failure == nil { failure = code }
    }
}
