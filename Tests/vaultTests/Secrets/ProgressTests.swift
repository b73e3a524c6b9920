import Foundation
import Testing
import VaultTestSupport

/// The progress line: on a terminal for work that lasts, never into a pipe, off with
/// --quiet, and without colour under NO_COLOR.
///
/// The secret comes through a FIFO that the test feeds in two parts with a pause between,
/// so the work lasts as long as the test wants, however fast the machine.
@Suite struct ProgressTests {
    /// Alice, with Bob as a peer to share with.
    private static func alice() throws -> (User, TemporaryDirectory) {
        let alice = try User().initialize("alice")
        let bob = try User().initialize("bob")
        try alice.ok("peer", "add", try bob.card(), "--label", "bob", "--yes")
        let files = TemporaryDirectory("vault-progress")
        try FileManager.default.createDirectory(atPath: files.file("out"), withIntermediateDirectories: true)
        #expect(mkfifo(files.file("fifo"), 0o600) == 0)
        return (alice, files)
    }

    private static func share(_ files: TemporaryDirectory, _ extra: String...) -> [String] {
        ["share", files.file("fifo"), "--to", "bob", "-k", "2", "--out-dir", files.file("out")] + extra
    }

    @Test func aTerminalSeesTheLineRedrawnInPlace() throws {
        let (alice, files) = try Self.alice()
        let feeder = SlowFeeder(files.file("fifo"))
        let session = try alice.vault.onTerminal(Self.share(files))
        // The line appears while the first part waits for the second.
        try session.expect("MB/s", timeout: 30)
        feeder.finish()
        try session.expect("your share is in the keystore", timeout: 60)
        #expect(session.finish().status == 0)
        let transcript = session.transcript
        #expect(transcript.contains("\rsharing  ") || transcript.contains("\r\u{1B}[1msharing\u{1B}[0m  "), "\(transcript.debugDescription)")
        #expect(transcript.contains("4.0 MiB"), "\(transcript.debugDescription)")
        // Redrawn in place: each drawing ends by clearing the rest of the line, and the line
        // is cleared before the result is printed.
        #expect(transcript.contains("\u{1B}[K"))
        #expect(transcript.contains("\r\u{1B}[K"))
        #expect(transcript.contains("\u{1B}[1m"), "colour on a terminal without NO_COLOR")
    }

    @Test func plainUnderNoColor() throws {
        let (alice, files) = try Self.alice()
        let feeder = SlowFeeder(files.file("fifo"))
        let session = try alice.vault.onTerminal(Self.share(files), environment: ["NO_COLOR": "1"])
        try session.expect("MB/s", timeout: 30)
        feeder.finish()
        try session.expect("your share is in the keystore", timeout: 60)
        #expect(session.finish().status == 0)
        #expect(session.transcript.contains("\rsharing  "), "\(session.transcript.debugDescription)")
        #expect(!session.transcript.contains("\u{1B}[1m"), "\(session.transcript.debugDescription)")
    }

    @Test func quietShowsNone() throws {
        let (alice, files) = try Self.alice()
        _ = SlowFeeder(files.file("fifo"), pause: 1.5)
        let started = Date()
        let session = try alice.vault.onTerminal(Self.share(files, "--quiet"))
        try session.expect("your share is in the keystore", timeout: 60)
        #expect(session.finish().status == 0)
        // The work lasted long enough for a line to be drawn, had it not been --quiet.
        #expect(Date().timeIntervalSince(started) >= 1.5)
        #expect(!session.transcript.contains("sharing  ") && !session.transcript.contains("MB/s"), "\(session.transcript.debugDescription)")
    }

    @Test func aPipeGetsNone() throws {
        let (alice, files) = try Self.alice()
        _ = SlowFeeder(files.file("fifo"), pause: 1.5)
        let started = Date()
        let result = try alice.vault.run(Self.share(files))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(Date().timeIntervalSince(started) >= 1.5)
        #expect(!result.stderr.contains("\r") && !result.stderr.contains("\u{1B}") && !result.stderr.contains("MB/s"),
                "\(result.stderr.debugDescription)")
    }
}

/// Writes 4 MiB into a FIFO, waits (for `finish()`, or `pause` seconds), writes 1 MiB more
/// and closes it.
private final class SlowFeeder: @unchecked Sendable {
    private let go = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)

    init(_ fifo: String, pause: Double = 60) {
        Thread.detachNewThread { [self] in
            let fd = open(fifo, O_WRONLY)
            guard fd >= 0 else {
                done.signal()
                return
            }
            let chunk = [UInt8](repeating: 0x61, count: 1 << 20)
            for _ in 0..<4 { write(all: chunk, to: fd) }
            _ = go.wait(timeout: .now() + pause)
            write(all: chunk, to: fd)
            close(fd)
            done.signal()
        }
    }

    /// Lets the second part go, and waits for the FIFO to be closed.
    func finish() {
        go.signal()
        done.wait()
    }


    private func write(all bytes: [UInt8], to fd: Int32) {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { Foundation.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if count <= 0 { return }
            offset += count
        }
    }
}
