import Foundation

/// The clock of a test's world of vault processes (VaultCore's `VaultClock`): every process
/// started with ``environment`` reads the time as the system's plus ``offset``, so a test
/// lets an emergency wait or a request's lifetime pass with ``advance(by:)`` instead of
/// sleeping through it. Debug builds of vault only.
public final class TestClock: @unchecked Sendable {
    private let directory = TemporaryDirectory("vault-clock")
    private let lock = NSLock()
    /// The seconds the world's clock is ahead of the system's.
    public private(set) var offset: TimeInterval = 0

    /// A clock at the system's time.
    public init() { write(0) }

    /// What a vault process needs to read this clock.
    public var environment: [String: String] { ["VAULT_TEST_CLOCK": directory.file("offset")] }

    /// The time the world's processes read now.
    public var now: Date { Date().addingTimeInterval(lock.withLock { offset }) }

    /// Moves the world's time forward by `seconds`, for every process at once.
    public func advance(by seconds: TimeInterval) {
        lock.withLock {
            offset += seconds
            write(offset)
        }
    }

    /// Written whole and renamed into place: a process never reads half a number.
    private func write(_ value: TimeInterval) {
        let partial = directory.file("offset.partial")
        precondition(FileManager.default.createFile(atPath: partial, contents: Data("\(value)\n".utf8)), "the test clock could not be written")
        precondition(rename(partial, directory.file("offset")) == 0, "the test clock could not be moved")
    }
}
