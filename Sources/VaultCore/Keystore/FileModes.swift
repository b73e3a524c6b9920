import Foundation

/// File-system steps that keep the keystore private: the directory at 0700, the database
/// and its WAL and shared-memory files at 0600.
enum FileModes {
    static func createDirectory(_ home: VaultHome) throws(VaultError) {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: home.directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw .fileSystem(path: home.directory, reason: "exists and is not a directory")
            }
            return
        }
        let parent = PathText.directory(of: home.directory)
        // A file where a directory of the path should be: named, as Foundation says only
        // "File exists" of the path it was given.
        var ancestor = parent
        while !ancestor.isEmpty && ancestor != "/" && !FileManager.default.fileExists(atPath: ancestor) {
            ancestor = PathText.directory(of: ancestor)
        }
        if !ancestor.isEmpty, FileManager.default.fileExists(atPath: ancestor, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw .fileSystem(path: ancestor, reason: "exists and is not a directory")
        }
        do {
            if !parent.isEmpty {
                try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
            }
        } catch {
            throw .fileSystem(path: parent, error: error)
        }
        guard mkdir(home.directory, 0o700) == 0 || errno == EEXIST else {
            throw .fileSystem(path: home.directory, reason: String(cString: strerror(errno)))
        }
    }

    /// Creates an empty file at 0600; false if it already existed.
    static func createPrivateFile(_ path: String) throws(VaultError) -> Bool {
        let fd = Foundation.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd < 0 {
            if errno == EEXIST { return false }
            throw .fileSystem(path: path, reason: String(cString: strerror(errno)))
        }
        close(fd)
        return true
    }

    /// Brings the directory to 0700 and the database files to 0600. SQLite gives the WAL and
    /// shared-memory files the database file's mode, so fixing the database file suffices for
    /// files created later.
    static func tighten(_ home: VaultHome) throws(VaultError) {
        _ = chmod(home.directory, 0o700)
        for suffix in ["", "-wal", "-shm"] {
            let path = home.keystorePath + suffix
            var info = stat()
            guard stat(path, &info) == 0 else { continue }
            if info.st_mode & 0o077 != 0, chmod(path, 0o600) != 0 {
                throw .fileSystem(path: path, reason: "cannot restrict the mode to 0600")
            }
        }
    }

    /// Whether `path` is missing or holds no bytes.
    static func isEmpty(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) != 0 || info.st_size == 0
    }

    static func removeDatabaseFiles(_ path: String) {
        for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
    }
}
