import Foundation
import VaultCore
import VaultRelayClient
import VaultSync

/// `vault-bench --sync` (issue 36): Grouper's figure 6.1 again. Two instances of the account
/// book, on two homes whose keystores hold one key and one group (scripts/bench-sync makes
/// them: 2 of 3 holders, 3 relays on loopback, each change stored on all 3), each with its
/// `vault serve` running and the key unlocked. For M updated objects of 323 bytes: the time
/// from the first write on one side, through sending them (`send`), until the other side's
/// sync handed its app the M new values,
/// and where it went: data sync (writing the objects into the keystore, applying the
/// changes received, handing values to the app), secret sharing (sealing the message to
/// the key's holders and opening it) and network (everything between: relay requests).
struct SyncBench {
    /// An account book record, as the example's: 323 bytes of JSON with its note.
    struct Record: Codable, AppObjectType {
        static let appType = "Record"
        var id: String
        var amount: Int
        var day: String
        var classification: String
        var account: String
        var shop: String?
        var note: String
    }

    /// What one run measured, in seconds.
    struct Run {
        var total = 0.0, put = 0.0, apply = 0.0, deliver = 0.0, seal = 0.0, open = 0.0, upload = 0.0, download = 0.0
        /// CPU time of this process (both books), which another load on the machine does not stretch.
        var cpu = 0.0
        var data: Double { put + apply + deliver }
        var sharing: Double { seal + open }
        var network: Double { total - data - sharing }
    }

    static let objectBytes = 323
    static let app = "account-book-bench"

    let sender: AppStore
    let receiver: AppStore

    /// Opens the app on both homes (`key`: the key's id, which names it on both).
    static func open(homes: [String], key: String) async throws -> SyncBench {
        guard homes.count == 2 else { throw BenchFailure("--sync-homes takes two homes: the sender's and the receiver's") }
        var stores: [AppStore] = []
        for home in homes {
            let keystore = try Keystore.open(home: VaultHome(directory: home))
            stores.append(try await AppStore.open(app, types: [Record.self], keystore: keystore, identity: try keystore.unlock(passphrase: nil),
                                                  key: key))
        }
        return SyncBench(sender: stores[0], receiver: stores[1])
    }

    /// Record `i` as written in round `round`: its note pads it to ``objectBytes``.
    static func record(_ i: Int, round: Int) throws -> Record {
        var record = Record(id: String(format: "r%03d", i), amount: 100 * round + i, day: "2026-03-01", classification: "c0ffee000001",
                            account: "c0ffee000002", shop: "c0ffee000003", note: "")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let bare = try encoder.encode(record).count
        record.note = String(repeating: "n", count: objectBytes - bare)
        return record
    }

    /// Writes the largest M once on both sides (not measured), so every run updates objects
    /// that exist.
    func prepare(objects: Int) async throws {
        for i in 0..<objects { try await sender.put(String(format: "r%03d", i), try Self.record(i, round: 0)) }
        try await sender.sync()
        try await receiver.sync()
    }

    /// Updates M objects on the sender and syncs them to the receiver.
    func run(objects: Int, round: Int) async throws -> Run {
        let clock = SyncClock()
        var received = 0
        let cpu = Self.processCPU()
        let start = ContinuousClock.now
        try await SyncClock.$current.withValue(clock) {
            try await sender.put(contentsOf: try (0..<objects).map { (String(format: "r%03d", $0), try Self.record($0, round: round)) })
            // Sent, then taken and applied on the other side: the sender's own sync would
            // also fetch, which is not part of what it sends.
            try await sender.send()
            try await receiver.sync { change in
                if change.kind == .put, let record = change.value as? Record, record.amount / 100 == round { received += 1 }
            }
        }
        let total = ContinuousClock.now - start
        let cpuUsed = Self.processCPU() - cpu
        guard received == objects else {
            throw BenchFailure("the receiver was handed \(received) of the \(objects) objects written: the relays did not carry them all")
        }
        let s = Self.seconds
        return Run(total: s(total), put: s(clock[.put]), apply: s(clock[.apply]), deliver: s(clock[.deliver]), seal: s(clock[.seal]),
                   open: s(clock[.open]), upload: s(clock[.upload]), download: s(clock[.download]), cpu: cpuUsed)
    }

    /// Runs every M `runs` times; prints each M's median run.
    static func measure(homes: [String], key: String, counts: [Int], runs: Int) async throws {
        let bench = try await open(homes: homes, key: key)
        print("vault-bench --sync: M objects of \(objectBytes) bytes updated on one account book and handed to the other's app,"
            + " through \(bench.sender.group.relays.count) relays (key '\(bench.sender.key.displayName)', \(bench.sender.key.secret.header.threshold)"
            + " of \(bench.sender.key.secret.header.count) holders); median of \(runs) runs, in ms; load average \(Self.loadAverage())")
        print("M     total    data sync (put, apply, deliver)      secret sharing (seal, open)   network (upload, download)   CPU")
        try await bench.prepare(objects: counts.max() ?? 1)
        var round = 0
        for m in counts {
            var results: [Run] = []
            for _ in 0..<runs {
                round += 1
                results.append(try await bench.run(objects: m, round: round))
            }
            let median = results.sorted { $0.total < $1.total }[results.count / 2]
            print(Self.row(m, median))
        }
        // One by one, as an app that writes each object as it changes.
        let m = counts.max() ?? 1
        round += 1
        let start = ContinuousClock.now
        for i in 0..<m { try await bench.sender.put(String(format: "r%03d", i), try Self.record(i, round: round)) }
        print("\(m) objects written one put each (a transaction, and a disk flush, each): \(Self.ms(Self.seconds(ContinuousClock.now - start))) ms")
        try await bench.sender.sync()
        try await bench.receiver.sync()
    }

    static func seconds(_ duration: Swift.Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// The machine's load average over the last minute, as /proc/loadavg says it.
    static func loadAverage() -> String {
        ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").first).map(String.init) ?? "unknown"
    }

    /// Seconds of CPU this process used so far, every thread.
    static func processCPU() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    static func ms(_ seconds: Double) -> String { String(format: "%.1f", seconds * 1000) }

    /// One M's line: each figure in ms.
    static func row(_ m: Int, _ run: Run) -> String {
        func column(_ text: String, _ width: Int) -> String { text + String(repeating: " ", count: max(1, width - text.count)) }
        return column("\(m)", 6) + column(ms(run.total), 9) + column("\(ms(run.data)) (\(ms(run.put)), \(ms(run.apply)), \(ms(run.deliver)))", 37)
            + column("\(ms(run.sharing)) (\(ms(run.seal)), \(ms(run.open)))", 30)
            + column("\(ms(run.network)) (\(ms(run.upload)), \(ms(run.download)))", 29) + ms(run.cpu)
    }
}
