import Foundation
import VaultCore

/// The directory of `--out-dir`: created when it is missing, with any missing parents, at
/// mode 0700 (what goes there is for one person: bundles sealed to their holders, received
/// messages), as `mkdir -p -m 700` would. A command that then fails removes again the
/// directories it created, if they are still empty, so that it leaves nothing behind.
struct OutputDirectory {
    /// The directories created, outermost first.
    private(set) var created: [String] = []

    /// Makes sure `path` is a directory, creating what is missing; says so at once, or with
    /// `announce` false only at ``announce()`` (a command that may still fail, and then
    /// removes it).
    init(_ path: String, announce: Bool = true) throws {
        var missing: [String] = []
        var at = path
        while !at.isEmpty, at != "/", at != "." {
            var info = stat()
            if stat(at, &info) == 0 {
                guard info.st_mode & S_IFMT == S_IFDIR else { throw VaultError.fileSystem(path: at, errno: ENOTDIR) }
                break
            }
            guard errno == ENOENT else { throw VaultError.fileSystem(path: at, errno: errno) }
            missing.append(at)
            at = PathText.directory(of: at)
        }
        for directory in missing.reversed() {
            guard mkdir(directory, 0o700) == 0 || errno == EEXIST else {
                let failure = errno
                removeIfEmpty()
                throw VaultError.fileSystem(path: directory, errno: failure)
            }
            created.append(directory)
        }
        if announce { self.announce() }
    }

    /// Says which directory was created, if one was.
    func announce() {
        if let first = created.first { Terminal.standardError("created directory \(first) (mode 0700)") }
    }

    /// Removes the directories this created, deepest first, while they are empty.
    func removeIfEmpty() {
        for directory in created.reversed() where rmdir(directory) != 0 { return }
    }
}
