import Foundation
import Testing
@testable import VaultCore
import VaultTestSupport

/// Issue 18: output files start write-back every 8 MiB and make what is written durable
/// every 64 MiB, on a queue of their own (KernelHints), and report at commit what failed
/// there.
@Suite struct OutputFileTests {
    let directory = TemporaryDirectory("vault-output")

    /// 80 MiB and a little more, appended 64 KiB at a time, pass through every window of
    /// write-behind and one flush; the committed file holds exactly what was written.
    @Test func aFileWrittenPastTheFlushWindowIsWholeAfterCommit() throws {
        let path = directory.file("long")
        let file = try OutputFile(path: path, hiddenUntilCommit: true)
        let chunks = Int((OutputFile.flushEvery + 2 * OutputFile.writeBehind) / 65536) + 3
        var chunk = [UInt8](repeating: 0, count: 65536)
        let written = SHA256Hasher()
        for index in 0..<chunks {
            for at in stride(from: 0, to: chunk.count, by: 8) {
                withUnsafeBytes(of: UInt64(index * chunk.count + at).bigEndian) { chunk.replaceSubrange(at..<at + 8, with: $0) }
            }
            try chunk.withUnsafeBytes { bytes in
                written.update(bytes)
                try file.write(bytes)
            }
        }
        #expect(!FileManager.default.fileExists(atPath: path), "nothing has a name before the commit")
        try file.commit()

        let info = try FileManager.default.attributesOfItem(atPath: path)
        #expect((info[.size] as? Int) == chunks * chunk.count)
        let read = SHA256Hasher()
        var source = try FileSource(path: path)
        try source.forEachChunk { read.update($0) }
        #expect(read.finish() == written.finish())
    }

    /// A file that need not be durable (a recovered plaintext) is left to the kernel's
    /// write-back, and still has no name until its commit, nor after a failure.
    @Test func aFileThatNeedNotBeDurableStillAppearsWholeOrNotAtAll() throws {
        let path = directory.file("plain")
        let bytes = SecureRandom().bytes(Int(OutputFile.writeBehind) + 12345)
        let file = try OutputFile(path: path, hiddenUntilCommit: true, durable: false)
        try bytes.withUnsafeBytes { try file.write($0) }
        #expect(!FileManager.default.fileExists(atPath: path))
        try file.commit()
        #expect(FileManager.default.contents(atPath: path) == Data(bytes))

        let abandoned = directory.file("abandoned")
        do {
            let file = try OutputFile(path: abandoned, hiddenUntilCommit: true, durable: false)
            try bytes.withUnsafeBytes { try file.write($0) }
        }
        #expect(!FileManager.default.fileExists(atPath: abandoned))
    }

    /// A flush or a write-back request that fails on the queue is not lost: Linux reports
    /// a write-back error once, so the commit's own fsync could miss it. A pipe refuses both
    /// (fdatasync: EINVAL, sync_file_range: ESPIPE); the first failure is the one kept.
    @Test func aFailedRequestIsReportedWhenTheHintsFinish() throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { ends.forEach { close($0) } }

        let flushing = KernelHints(fd: ends[1])
        flushing.flush()
        flushing.startWriteBack(0, 65536)
        #expect(flushing.finish() == EINVAL)

        let starting = KernelHints(fd: ends[1])
        starting.startWriteBack(0, 65536)
        #expect(starting.finish() == ESPIPE)

        let reading = KernelHints(fd: ends[0])
        reading.readAhead(65536, at: 0)
        #expect(reading.finish() == nil, "a read-ahead hint that fails costs only speed")
    }
}

/// Where the file system has no O_TMPFILE (vfat, NFS, CIFS), a file for plaintext is
/// written under a temporary name, and the name asked for appears only whole; what a killed
/// vault left under such a name is removed by the next write of the same path.
@Suite struct OutputFileWithoutUnnamedFilesTests {
    let directory = TemporaryDirectory("vault-output-named")

    func named(_ path: String, replace: Bool = false) throws -> OutputFile {
        try OutputFile(path: path, replace: replace, mode: 0o600, hiddenUntilCommit: true, durable: false, shownAs: nil, unnamedFiles: false)
    }

    func entries() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() }

    @Test func theNameAskedForHoldsOnlyAWholeFile() throws {
        let path = directory.file("plain.txt")
        let file = try named(path)
        try Array("part of a secret".utf8).withUnsafeBytes { try file.write($0) }
        #expect(!FileManager.default.fileExists(atPath: path))
        let written = try entries()
        #expect(written.count == 1 && written[0].hasPrefix("plain.txt.vault-\(getpid())-"), "\(written)")
        try file.commit()
        #expect(try entries() == ["plain.txt"])
        #expect(FileManager.default.contents(atPath: path) == Data("part of a secret".utf8))
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int == 0o600)

        do {
            let dropped = try named(directory.file("dropped.txt"))
            try Array("part".utf8).withUnsafeBytes { try dropped.write($0) }
        }
        #expect(try entries() == ["plain.txt"])
    }

    /// A file made at the name while vault wrote is neither replaced nor lost.
    @Test func aFileThatAppearedMeanwhileIsKept() throws {
        let path = directory.file("taken.txt")
        do {
            let file = try named(path)
            try Array("vault's".utf8).withUnsafeBytes { try file.write($0) }
            try Data("someone else's".utf8).write(to: URL(fileURLWithPath: path))
            #expect(throws: VaultError.fileExists(path: path)) { try file.commit() }
        }
        #expect(FileManager.default.contents(atPath: path) == Data("someone else's".utf8))
        #expect(try entries() == ["taken.txt"])

        let replacing = try named(path, replace: true)
        try Array("vault's".utf8).withUnsafeBytes { try replacing.write($0) }
        try replacing.commit()
        #expect(FileManager.default.contents(atPath: path) == Data("vault's".utf8))
    }

    /// A process that is gone left its temporary file: removed. A running one's (this
    /// process's, and the parent's) and files that only look alike are kept.
    @Test func whatAKilledWriteLeftIsRemovedByTheNextWriteOfThatPath() throws {
        let gone = Process()
        gone.executableURL = URL(fileURLWithPath: "/bin/true")
        try gone.run()
        gone.waitUntilExit()
        let path = directory.file("out.txt")
        let left = ["out.txt.vault-\(gone.processIdentifier)-12345", "out.txt.vault-\(gone.processIdentifier)-9"]
        let kept = ["out.txt.vault-\(getpid())-77", "out.txt.vault-\(getppid())-78", "out.txt.vault-\(gone.processIdentifier)-x",
                    "out.txt.vault-\(gone.processIdentifier)", "other.txt.vault-\(gone.processIdentifier)-1"]
        for name in left + kept { try Data("old".utf8).write(to: URL(fileURLWithPath: directory.file(name))) }
        // Another user's, and what is no regular file, are not this user's to remove.
        let others = "out.txt.vault-\(gone.processIdentifier)-55", folder = "out.txt.vault-\(gone.processIdentifier)-56"
        try Data("theirs".utf8).write(to: URL(fileURLWithPath: directory.file(others)))
        #expect(chown(directory.file(others), 65534, 65534) == 0)
        try FileManager.default.createDirectory(atPath: directory.file(folder), withIntermediateDirectories: false)
        let file = try OutputFile(path: path, hiddenUntilCommit: true)
        try file.commit()
        #expect(try entries() == (kept + [others, folder, "out.txt"]).sorted())
    }

    /// A directory is never replaced by a file: refused before anything is written.
    @Test func aDirectoryIsRefusedAtOnce() throws {
        let folder = directory.file("folder")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        #expect(throws: VaultError.fileSystem(path: folder, errno: EISDIR)) {
            try OutputFile(path: folder, replace: true, hiddenUntilCommit: true)
        }
    }
}
