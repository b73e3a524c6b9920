import Foundation
import NIOCore
import NIOEmbedded
import Testing
@testable import VaultNet

/// The admission rules under `vault serve` (LoadTests drives them with real connections).
@Suite struct ConnectionSlotsTests {
    @Test func aFullHandshakingTableClosesItsOldestForTheNewcomer() throws {
        let slots = ConnectionSlots(handshaking: 3, established: 1)
        let channels = try (0..<5).map { _ in
            let channel = EmbeddedChannel()
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            return channel
        }
        let tickets = channels.map { slots.admit($0) }
        #expect(tickets.map(\.evicted) == [false, false, false, true, true])
        // The two oldest were closed; the three newest are open and held.
        #expect(channels.map(\.isActive) == [false, false, true, true, true])
        #expect(slots.counts == (handshaking: 3, established: 0))
        // An evicted connection cannot become established, even if its handshake finished.
        #expect(!slots.establish(tickets[0].ticket))
        #expect(slots.establish(tickets[2].ticket))
        // The established table is full: the next is refused, and stays handshaking until released.
        #expect(!slots.establish(tickets[3].ticket))
        #expect(slots.release(tickets[2].ticket))
        #expect(!slots.release(tickets[3].ticket))
        #expect(slots.establish(tickets[4].ticket))
        #expect(slots.counts == (handshaking: 0, established: 1))
    }

    @Test func throttledLinesAreCountedNotLost() {
        let lines = Lines()
        let throttle = LogThrottle(interval: 10) { lines.append($0) }
        let start = Date()
        for second in 0..<25 { throttle.note("bad", "bad handshake", now: start.addingTimeInterval(Double(second))) }
        throttle.note("other", "untrusted key", now: start.addingTimeInterval(1))
        #expect(lines.all == ["bad handshake", "bad handshake (and 9 more like it before)",
                              "bad handshake (and 9 more like it before)", "untrusted key"])
    }

    final class Lines: @unchecked Sendable {
        private let lock = NSLock()
        private var lines: [String] = []
        func append(_ line: String) { lock.withLock { lines.append(line) } }
        var all: [String] { lock.withLock { lines } }
    }
}
