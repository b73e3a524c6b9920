import Foundation

/// `$VAULT_HOME/spool`, at 0700: what is on its way in or out through relays, message
/// shares and item changes. Each file holds only ciphertext (a relay's share with boxes
/// sealed to recipients, or an item already encrypted under its shared key), and each is
/// removed once sent or applied; what a crash leaves is swept at the next start.
public struct Spool {
    /// The folder.
    public let directory: String

    /// The home's spool, made if it is missing.
    public init(home: VaultHome) throws(VaultError) {
        directory = home.directory + "/spool"
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw .fileSystem(path: directory, reason: String(cString: strerror(errno)))
        }
    }

    /// A new file's path in it, named as transient files are (swept after a crash).
    public func newPath(_ suffix: String = "share.vmsg") -> String { directory + "/" + VaultHome.transientFileName(suffix) }

    /// A file's length and SHA-256, read in 64 KiB chunks.
    public static func hash(_ path: String) throws -> (UInt64, [UInt8]) {
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
