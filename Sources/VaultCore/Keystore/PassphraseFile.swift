import Foundation

/// Reads a passphrase from a file, for scripts (`--passphrase-file`).
///
/// The passphrase is the file's first line without its line ending; the file must be at
/// most ``maximumLength`` bytes. Reading goes straight into locked memory, so the
/// passphrase is never held in an ordinary, unzeroed buffer.
public enum PassphraseFile {
    /// The largest passphrase file read.
    public static let maximumLength = 4096

    /// The passphrase in the file at `path` (`-` is not accepted: stdin may carry data).
    /// Errors call it `what` (a passphrase, a PIN, a password) and the file `shownAs`
    /// (default: its path; "standard input" for `/dev/stdin`).
    public static func read(_ path: String, what: String = "passphrase", shownAs: String? = nil) throws(VaultError) -> SecureBytes {
        let name = shownAs ?? path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw .fileSystem(path: name, reason: String(cString: strerror(errno)))
        }
        defer { close(fd) }
        let buffer = SecureBytes(count: maximumLength + 1)
        var length = 0
        while length < buffer.count {
            let count = buffer.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress! + length, $0.count - length) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw .fileSystem(path: name, reason: String(cString: strerror(errno))) }
            if count == 0 { break }
            length += count
        }
        guard length <= maximumLength else {
            throw .fileSystem(path: name, reason: "a \(what) file is at most \(maximumLength) bytes")
        }
        let end = buffer.withUnsafeBytes { bytes -> Int in
            var end = bytes.prefix(length).firstIndex(of: 0x0A) ?? length
            if end > 0 && bytes[end - 1] == 0x0D { end -= 1 }
            return end
        }
        guard end > 0 else { throw .inFile(path: name, .empty(what: what)) }
        return buffer.slice(0..<end)
    }
}
