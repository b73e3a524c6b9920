import Foundation
import VaultCore
import VaultRelayClient

/// `vault-bench --relay`: issue 37's figures against real relay processes on loopback
/// (Docs/DECISIONS.md, "Issue 37: the relay bench"). A measuring harness, like the rest of
/// `vault-bench`: its length is the cases it times.
///
/// 1. Signed PUT, list, GET and confirm of 1 KiB messages, at a given concurrency, by many
///    identities (so the per-key limit does not bind), on SQLite, and with `--postgres` on
///    PostgreSQL with one and with two relay processes.
/// 2. The relay's resident memory while it holds 2,000 idle connections.
/// 3. Grouper's figures 6.1 and 6.2: the send and receive time of one message against n
///    (k = 3) and against k (n = 30), and of M messages with f(2, 3, 3), on 30 relays.
extension Bench {
    func measureRelays(base: String) async throws {
        let fleet = RelayFleet(base: base)
        defer { fleet.stopAll() }
        let chosen = Set(parts.split(separator: ",").map(String.init))
        let sqlite = try fleet.start(store: "sqlite:\(base)/load.db")
        if chosen.contains("throughput") {
            say("relays: signed requests of 1 KiB messages, \(requests) of each, \(concurrency) at once, \(identities) identities, "
                + (client == "plain" ? "signed beforehand and sent by a plain client" : "by vault's client")
                + "; figures are requests a second, then median and p99 latency")
            let second = try fleet.start(store: "sqlite:\(base)/second.db")
            try await throughput("SQLite, 1 process", processes: [sqlite], second: second)
            if let postgres {
                let one = try fleet.start(store: postgres)
                try await throughput("PostgreSQL, 1 process", processes: [one], second: second)
                let two = try fleet.start(store: postgres)
                try await throughput("PostgreSQL, 2 processes", processes: [one, two], second: second)
            }
        }
        if chosen.contains("memory") { try residentMemory(of: sqlite, connections: 2000) }
        if chosen.contains("grouper") { try await grouperFigures(fleet: fleet) }
    }

    /// A line of figures, out at once (the bench runs for minutes, often into a file).
    private func say(_ line: String) {
        print(line)
        fflush(stdout)
    }

    // MARK: Throughput

    private func throughput(_ label: String, processes: [RelayFleet.Relay], second: RelayFleet.Relay) async throws {
        let members = try (0..<identities).map { i in Identity.generate(label: try Label("m\(i)")).0 }
        let record = try GroupRecord(
            id: SecureRandom().bytes(16), version: 1, name: Label("bench"), owner: members[0].card,
            relays: [GroupRecord.Relay(name: Label("a"), url: processes[0].url, card: processes[0].card),
                     GroupRecord.Relay(name: Label("b"), url: second.url, card: second.card)],
            members: members.map { GroupRecord.Member(label: $0.label, card: $0.card) }, signer: members[0])
        @Sendable func member(_ i: Int, at request: Int) -> RelayBench.Member {
            let process = processes[request % processes.count]
            return RelayBench.Member(identity: members[i % members.count], url: process.url, card: process.card)
        }
        try await member(0, at: 0).register(record)
        try await RelayBench.Member(identity: members[0], url: second.url, card: second.card).register(record)
        let accepted = await RelayBench.measure("accept", count: members.count, concurrency: concurrency) { i in
            try await member(i, at: i).accept(record)
        }
        guard accepted.failed == 0 else { throw BenchFailure("members could not accept the bench group: \(accepted.failure ?? "")") }

        // The shares, dealt before anything is timed: message j from member j to member j+1.
        let directory = base(of: processes[0]) + "/shares-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let content = SecureRandom().bytes(1024)
        var shares: [(id: [UInt8], bytes: [UInt8])] = []
        for j in 0..<requests {
            let outputs = try (1...2).map { try OutputFile(path: "\(directory)/\(j)-\($0)") }
            let request = MessageRequest(groupID: record.id, type: .note, threshold: 2,
                                         recipients: [MessageRecipient(card: members[(j + 1) % members.count].card, sequence: UInt64(j / members.count + 1))],
                                         lifetime: 3600, deleteWhenConfirmed: false)
            let header = try MessageDealer.deal(request, content: BytesSource(content), sender: members[j % members.count], outputs: outputs)[0]
            for output in outputs { try output.commit() }
            shares.append((header.messageID, try [UInt8](Data(contentsOf: URL(fileURLWithPath: outputs[0].path)))))
            for output in outputs { unlink(output.path) }
        }
        let group = record.id
        let all = shares
        // The relays' own CPU time a request, besides the rate: the bench client shares the
        // machine's cores with the relays, so the rate alone cannot tell what the relay
        // costs from what the client does. And how busy the whole machine was: where it was
        // busy throughout, another relay process has no core left to run on.
        func timed(_ figures: () async -> RelayBench.Figures) async -> (RelayBench.Figures, Double, Double) {
            let before = processes.map { $0.cpuSeconds() }.reduce(0, +), machine = MachineTime.now()
            let result = await figures()
            let used = processes.map { $0.cpuSeconds() }.reduce(0, +) - before
            return (result, used / Double(max(1, result.count)), MachineTime.now().busy(since: machine))
        }
        let results: [(RelayBench.Figures, Double, Double)]
        if client == "plain" {
            // Each kind's requests signed just before it is timed, well within the relay's
            // time window, each by the member and for the process vault's client would use.
            func plain(_ name: String, _ method: String, expect: Int, path: (Int) -> String,
                       body: (Int) -> [UInt8] = { _ in [] }, by sender: (Int) -> Int) async throws -> (RelayBench.Figures, Double, Double) {
                let load = try (0..<requests).map { j in
                    let process = processes[j % processes.count]
                    return try RelayLoad.Request(identity: members[sender(j) % members.count], url: process.url, card: process.card,
                                                 method: method, path: path(j), body: body(j), expected: expect)
                }
                return await timed { await RelayLoad.run(name, requests: load, connections: concurrency) }
            }
            let message = { (j: Int) in "/v1/groups/\(group.hex)/messages/\(all[j].id.hex)" }
            results = [
                try await plain("PUT", "PUT", expect: 201, path: message, body: { all[$0].bytes }, by: { $0 }),
                try await plain("list", "GET", expect: 200, path: { _ in "/v1/messages?limit=100&group=\(group.hex)" }, by: { $0 + 1 }),
                try await plain("GET", "GET", expect: 200, path: message, by: { $0 + 1 }),
                try await plain("confirm", "POST", expect: 204, path: { message($0) + "/confirm" }, by: { $0 + 1 }),
            ]
        } else {
            results = [
                await timed {
                    await RelayBench.measure("PUT", count: requests, concurrency: concurrency) { j in
                        try await member(j, at: j).put(all[j].bytes, group: group, id: all[j].id)
                    }
                },
                await timed {
                    await RelayBench.measure("list", count: requests, concurrency: concurrency) { j in
                        try await member(j + 1, at: j).list(group: group)
                    }
                },
                await timed {
                    await RelayBench.measure("GET", count: requests, concurrency: concurrency) { j in
                        try await member(j + 1, at: j).get(group: group, id: all[j].id)
                    }
                },
                await timed {
                    await RelayBench.measure("confirm", count: requests, concurrency: concurrency) { j in
                        try await member(j + 1, at: j).confirm(group: group, id: all[j].id)
                    }
                },
            ]
        }
        for (figures, cpu, busy) in results {
            say(String(format: "%@  %-8@ %7.0f /s   median %6.1f ms   p99 %6.1f ms   relay CPU %5.0f µs a request   machine %3.0f%% busy%@", label,
                       figures.operation, figures.rate, figures.median * 1000, figures.p99 * 1000, cpu * 1e6, busy * 100,
                       figures.failed == 0 ? "" : "   \(figures.failed) failed: \(figures.failure ?? "")"))
        }
    }

    private func base(of relay: RelayFleet.Relay) -> String { relay.directory }

    // MARK: Memory

    /// Holds `connections` idle connections to `relay` from 40 loopback addresses (under its
    /// cap of 64 an address) and reads the relay's resident memory.
    private func residentMemory(of relay: RelayFleet.Relay, connections: Int) throws {
        let port = Int(relay.url.split(separator: ":").last!)!
        var sockets: [Int32] = []
        defer { for socket in sockets { close(socket) } }
        for i in 0..<connections {
            let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard socket >= 0 else { throw BenchFailure("socket: \(String(cString: strerror(errno)))") }
            sockets.append(socket)
            var local = sockaddr_in(sin_family: sa_family_t(AF_INET), sin_port: 0, sin_addr: in_addr(s_addr: inet_addr("127.0.100.\(1 + i % 40)")),
                                    sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
            var remote = sockaddr_in(sin_family: sa_family_t(AF_INET), sin_port: UInt16(port).bigEndian,
                                     sin_addr: in_addr(s_addr: inet_addr("127.0.0.1")), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
            let length = socklen_t(MemoryLayout<sockaddr_in>.size)
            guard withUnsafePointer(to: &local, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) } }) == 0,
                  withUnsafePointer(to: &remote, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, length) } }) == 0
            else { throw BenchFailure("connect: \(String(cString: strerror(errno)))") }
            _ = "GET /card HTTP/1.1\r\nHost: r\r\n".withCString { send(socket, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        }
        usleep(2_000_000)
        let held = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(relay.pid)/fd").count) ?? 0
        say(String(format: "relay memory: %.1f MiB resident holding %d unfinished requests (%d descriptors open), peak %.1f MiB since it started",
                     Double(relay.memory("VmRSS")) / 1024, connections, held, Double(relay.memory("VmHWM")) / 1024))
    }

    // MARK: Grouper's figures

    /// Send and receive of one 1 KiB note through `vault`'s own send and receive, between two
    /// keystores, on groups of the first n of 30 relays.
    private func grouperFigures(fleet: RelayFleet) async throws {
        var relays: [RelayFleet.Relay] = []
        for i in 0..<30 { relays.append(try fleet.start(store: "sqlite:\(fleet.base)/g\(i).db")) }
        let home = fleet.base + "/grouper"
        let alice = try Keystore.create(home: VaultHome(directory: home + "/alice"), label: Label("alice"), passphrase: nil)
        let bob = try Keystore.create(home: VaultHome(directory: home + "/bob"), label: Label("bob"), passphrase: nil)
        let aliceID = try alice.unlock(passphrase: nil), bobID = try bob.unlock(passphrase: nil)
        try alice.addPeer(bobID.card, label: bobID.label, address: nil)
        try bob.addPeer(aliceID.card, label: aliceID.label, address: nil)
        try bob.pinRelay(label: Label("r1"), url: relays[0].url, card: relays[0].card)

        func group(n: Int) async throws -> GroupRecord {
            let record = try GroupRecord(
                id: SecureRandom().bytes(16), version: 1, name: Label("g\(n)-\(UUID().uuidString.prefix(8))"), owner: aliceID.card,
                relays: relays.prefix(n).enumerated().map { GroupRecord.Relay(name: try! Label("r\($0 + 1)"), url: $1.url, card: $1.card) },
                members: [GroupRecord.Member(label: aliceID.label, card: aliceID.card), GroupRecord.Member(label: bobID.label, card: bobID.card)],
                signer: aliceID)
            let refused = await Messenger.publish(record, identity: aliceID)
            guard refused.isEmpty else { throw BenchFailure("bench group: \(refused[0])") }
            try alice.accept(group: record)
            // bob accepts it (and every earlier one) once, untimed.
            _ = try await Messenger.receive(groupName: nil, keystore: bob, identity: bobID, sink: DiscardingSink())
            return record
        }
        /// One send of `m` notes and one receive of them all, `repeats` times: median seconds.
        func time(_ record: GroupRecord, k: Int, s: Int, m: Int, repeats: Int = 3) async throws -> (send: Double, receive: Double) {
            var sends: [Double] = [], receives: [Double] = []
            let bobMember = record.members.first { $0.card == bobID.card }!
            for _ in 0..<repeats {
                let start = Date()
                for _ in 0..<m {
                    _ = try await Messenger.send(BytesSource(SecureRandom().bytes(1024)), type: .note, metadata: SecretMetadata(), group: record,
                                                 to: [bobMember], threshold: k, minimumRelays: s, lifetime: 3600, deleteWhenConfirmed: true,
                                                 keystore: alice, identity: aliceID)
                }
                sends.append(Date().timeIntervalSince(start))
                let sink = DiscardingSink()
                let received = Date()
                let report = try await Messenger.receive(groupName: record.name.value, keystore: bob, identity: bobID, sink: sink)
                receives.append(Date().timeIntervalSince(received))
                guard report.received.count == m else {
                    throw BenchFailure("received \(report.received.count) of \(m): \(report.distinctProblems.prefix(3))")
                }
            }
            return (sends.sorted()[sends.count / 2], receives.sorted()[receives.count / 2])
        }
        say("Grouper's figure 6.1, one 1 KiB note against n (k = 3, s = k), median of 3: send and receive in ms")
        for n in [6, 10, 14, 18, 22, 26, 30] {
            let (send, receive) = try await time(try await group(n: n), k: 3, s: 3, m: 1)
            say(String(format: "  n = %2d   send %7.1f ms   receive %7.1f ms", n, send * 1000, receive * 1000))
        }
        let wide = try await group(n: 30)
        say("Grouper's figure 6.1, against k (n = 30, s = k)")
        for k in [2, 5, 10, 15, 20, 25, 30] {
            let (send, receive) = try await time(wide, k: k, s: k, m: 1)
            say(String(format: "  k = %2d   send %7.1f ms   receive %7.1f ms", k, send * 1000, receive * 1000))
        }
        let small = try await group(n: 3)
        say("Grouper's figure 6.2, M notes with f(2, 3, 3): sent one after another, then received in one run")
        for m in [1, 10, 50, 100] {
            let (send, receive) = try await time(small, k: 2, s: 3, m: m, repeats: 1)
            say(String(format: "  M = %3d  send %8.1f ms   receive %8.1f ms", m, send * 1000, receive * 1000))
        }
    }
}

/// Where a benchmark's received messages go: nowhere.
private final class DiscardingSink: MessageSink {
    func begin(_ header: MessageHeader, sender: GroupRecord.Member, metadata: SecretMetadata) throws {}
    func write(_ bytes: UnsafeRawBufferPointer) throws {}
    func commit() throws -> String { "nowhere" }
    func discard() {}
}

/// The whole machine's CPU time so far, busy and in all, from /proc/stat's first line.
private struct MachineTime {
    let busy: Double
    let total: Double

    static func now() -> MachineTime {
        let stat = (try? String(contentsOfFile: "/proc/stat", encoding: .utf8)) ?? ""
        // "cpu  user nice system idle iowait irq softirq steal …": idle and iowait are the
        // time no process ran.
        let fields = stat.prefix { $0 != "\n" }.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard fields.count >= 5 else { return MachineTime(busy: 0, total: 0) }
        let total = fields.prefix(8).reduce(0, +)
        return MachineTime(busy: total - fields[3] - fields[4], total: total)
    }

    /// The share of the machine's time that was busy between `earlier` and this one.
    func busy(since earlier: MachineTime) -> Double {
        let total = self.total - earlier.total
        return total > 0 ? (busy - earlier.busy) / total : 0
    }
}

/// Relay processes of this very binary, on loopback, for the bench.
final class RelayFleet: @unchecked Sendable {
    struct Relay {
        let process: Process
        let url: String
        let card: KeyCard
        let directory: String
        var pid: Int32 { process.processIdentifier }

        /// The CPU time the process has used, user and system, in seconds (/proc/PID/stat).
        func cpuSeconds() -> Double {
            let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
            // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
            guard let close = stat.lastIndex(of: ")") else { return 0 }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
            return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
        }

        /// A line of /proc/PID/status, in KiB.
        func memory(_ field: String) -> Int {
            let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
            return status.split(separator: "\n").first { $0.hasPrefix(field + ":") }
                .flatMap { Int($0.split(separator: " ").dropLast().last ?? "") } ?? 0
        }
    }

    let base: String
    private var started: [Relay] = []

    init(base: String) { self.base = base }

    /// Starts `vault relay serve` on a free loopback port, with limits a bench does not
    /// bind on (one source address for everything), and waits for its card.
    func start(store: String) throws -> Relay {
        let directory = base + "/relay-\(started.count)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let log = directory + "/log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let process = Process()
        process.executableURL = VaultExecutable.url
        process.arguments = ["relay", "serve", "--listen", "127.0.0.1:0", "--store", store, "--group-owners", "anyone",
                             "--address-rate", "1000000", "--max-connections-per-address", "0", "--sweep-interval", "3600",
                             "--groups-per-owner", "100000"]
        process.standardOutput = FileHandle(forWritingAtPath: log)
        process.standardError = FileHandle(forWritingAtPath: log)
        try process.run()
        for _ in 0..<600 {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            let lines = text.split(separator: "\n")
            if let url = lines.first(where: { $0.contains("listening on ") })?.split(separator: " ").last,
               let card = lines.first(where: { $0.hasPrefix("card ") })?.split(separator: " ").last,
               text.contains("connections  ") {
                let relay = Relay(process: process, url: String(url), card: try KeyCard(text: String(card)), directory: directory)
                started.append(relay)
                return relay
            }
            guard process.isRunning else { break }
            usleep(100_000)
        }
        process.terminate()
        throw BenchFailure("a bench relay did not start: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
    }

    func stopAll() {
        for relay in started where relay.process.isRunning { relay.process.terminate() }
        for relay in started { relay.process.waitUntilExit() }
        started = []
    }
}

/// The `vault` binary beside this one: the relays a bench starts are real `vault relay
/// serve` processes, built with it (`swift build` builds both into one directory).
enum VaultExecutable {
    static var url: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("vault")
    }
}
