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
