import Foundation
import VaultCore

/// `$VAULT_HOME/spool`, at 0700: message shares on their way in or out. Each holds one
/// relay's share only (ciphertext and boxes sealed to recipients), and each is removed
/// once sent or opened; what a crash leaves is swept at the next start.
struct Spool {
    let directory: String

    init(home: VaultHome) throws(VaultError) {
        directory = home.directory + "/spool"
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw .fileSystem(path: directory, reason: String(cString: strerror(errno)))
        }
    }

    func newPath() -> String { directory + "/" + VaultHome.transientFileName("share.vmsg") }

    /// A file's length and SHA-256, read in 64 KiB chunks.
    static func hash(_ path: String) throws -> (UInt64, [UInt8]) {
        let source = try FileSource(path: path)
        let hasher = SHA256Hasher()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 64)
        defer { buffer.deallocate() }
        var length: UInt64 = 0
        while true {
            let count = try source.read(into: buffer)
            if count == 0 { break }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            length += UInt64(count)
        }
        return (length, hasher.finish())
    }
}
