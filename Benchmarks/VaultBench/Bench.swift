import ArgumentParser
import Foundation
import VaultCore
import VaultNet

/// `vault-bench`: the figures of Docs/BENCHMARKS.md, printed one line per case. A measuring
/// harness, not a part of vault a user runs: it lives outside the production targets, and
/// scripts/bench, bench-relay and bench-sync drive it.
@main
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vault-bench",
        abstract: "Measure share and recover throughput, piece overhead and peak memory.")

    @Option(help: ArgumentHelp("Payload sizes in MiB.", valueName: "mib"))
    var sizes: [Int] = [1, 64, 1024]

    @Option(name: .customShort("k"), help: "Threshold.")
    var threshold = 3

    @Option(name: .customShort("n"), help: "Holders.")
    var count = 5

    @Option(help: ArgumentHelp("Scratch directory (default: the system's temporary directory).", valueName: "dir"))
    var scratch: String?

    @Flag(help: "Measure over loopback instead: recovery latency (1 KiB) and delivering 100 MiB to the other holders.")
    var lan = false

    @Flag(help: "Measure object sync between two account books instead (scripts/bench-sync sets them up).")
    var sync = false

    @Option(help: ArgumentHelp("With --sync: the sender's and the receiver's homes, comma-separated.", valueName: "a,b"))
    var syncHomes: String?

    @Option(help: ArgumentHelp("With --sync: the shared key's id.", valueName: "id"))
    var syncKey: String?

    @Option(help: ArgumentHelp("With --sync: how many objects each case updates.", valueName: "m"))
    var objects: [Int] = [1, 10, 50, 100]

    @Option(help: ArgumentHelp("With --sync: runs per case (the median is printed).", valueName: "n"))
    var runs = 5
    @Flag(help: "Measure relays instead (relay processes on loopback): signed request throughput, memory at 2,000 connections, Grouper's figures 6.1 and 6.2.")
    var relay = false

    @Option(help: ArgumentHelp("With --relay, also measure PostgreSQL (one and two processes) in this database.", valueName: "url"))
    var postgres: String?

    @Option(help: ArgumentHelp("With --relay, requests of each kind.", valueName: "n"))
    var requests = 4000

    @Option(help: ArgumentHelp("With --relay, requests in flight at once.", valueName: "n"))
    var concurrency = 32

    @Option(help: ArgumentHelp("With --relay, identities making them (2 to 255).", valueName: "n"))
    var identities = 200

    @Option(help: ArgumentHelp("With --relay, the client of the throughput part: vault (signs each request as it goes and checks each signed answer, as vault does) or plain (requests signed beforehand, answers' status checked only, as a load generator does).",
                               valueName: "client"))
    var client = "vault"

    @Option(help: ArgumentHelp("With --relay, what to measure: throughput, memory, grouper (comma-separated).", valueName: "parts"))
    var parts = "throughput,memory,grouper"

    func run() async throws {
        if sync {
            guard let syncHomes, let syncKey else { throw ValidationError("--sync needs --sync-homes A,B and --sync-key ID") }
            guard runs >= 1, objects.allSatisfy({ (1...1000).contains($0) }) else { throw ValidationError("--runs is 1 or more, --objects 1 to 1000") }
            return try await SyncBench.measure(homes: syncHomes.split(separator: ",").map(String.init), key: syncKey, counts: objects, runs: runs)
        }
        let base = (scratch ?? NSTemporaryDirectory()) + "/vault-bench-\(getpid())"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { Self.removeScratch(base) }
        if relay {
            guard (2...255).contains(identities), requests >= 1, concurrency >= 1 else {
                throw ValidationError("--identities is 2 to 255, --requests and --concurrency at least 1")
            }
            guard ["vault", "plain"].contains(client) else { throw ValidationError("--client is vault or plain") }
            print("vault-bench --relay: \(ProcessInfo.processInfo.activeProcessorCount) cores")
            try await measureRelays(base: base)
            return
        }
        print("vault-bench: \(threshold) of \(count), \(ProcessInfo.processInfo.activeProcessorCount) cores")
        if !lan {
            let cores = ProcessInfo.processInfo.activeProcessorCount
            let cipher = Calibration.payloadCipherMBps(), hash = Calibration.commitmentMBps()
            let dispersal = Calibration.dispersalMBps(k: threshold, n: count), stream = Calibration.secretStreamMBps()
            let ceiling = Calibration.shareCeilingMBps(k: threshold, n: count, cores: cores, cipher: cipher, hash: hash, dispersal: dispersal)
            print(String(format: "one core: AES-256-GCM payload chunks %.0f MB/s, SHA-256 commitments %.0f MB/s, dispersal %.0f MB/s (libsodium secretstream, for items and the password layer: %.0f MB/s)",
                         cipher, hash, dispersal, stream))
            print(String(format: "share cannot beat %.0f MB/s on %d cores (each core seals, disperses and hashes chunks of its own; input and pieces not counted)",
                         ceiling, cores))
        }

        // Holders with their own keystores, all trusting each other and releasing to each
        // other without asking (a benchmark has nobody to approve).
        let labels = (1...count).map { "holder\($0)" }
        let homes = labels.map { VaultHome(directory: base + "/" + $0) }
        let keystores = try zip(homes, labels).map { try Keystore.create(home: $0, label: Label($1), passphrase: nil) }
        let identities = try keystores.map { try $0.unlock(passphrase: nil) }
        for (i, keystore) in keystores.enumerated() {
            for (j, identity) in identities.enumerated() where i != j {
                try keystore.addPeer(identity.card, label: identity.label, address: nil)
                try keystore.setAutoRelease(true, secretID: nil, peer: identity.card)
            }
        }
        if lan {
            try await measureLAN(base: base, keystores: keystores, identities: identities)
        } else {
            for mib in sizes {
                try measure(mib: mib, base: base, keystores: keystores, identities: identities)
            }
        }
        print(String(format: "peak resident memory of this process: %.1f MiB", Double(peakResidentKiB()) / 1024))
    }

    private func measure(mib: Int, base: String, keystores: [Keystore], identities: [Identity]) throws {
        let bytes = UInt64(mib) << 20
        let directory = base + "/\(mib)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let request = ShareRequest(type: .file, threshold: threshold,
                                   holders: identities.dropFirst().map { (label: $0.label, card: $0.card) })
        let outputs = try (0..<count).map { try OutputFile(path: directory + "/\($0 + 1).vshare") }
        let source = PatternSource(length: bytes)
        let shareSeconds = try time { _ = try SecretDealer.share(request, content: source, dealer: identities[0], outputs: outputs) }
        let sizes = try outputs.map { try FileManager.default.attributesOfItem(atPath: $0.path)[.size] as! UInt64 }
        let pieceBytes = sizes.reduce(0, +)

        // Holders 2 … k store their bundles and release their pieces to holder 1.
        let own = try keystores[0].storeOwnBundle(at: outputs[0].path, identity: identities[0], name: nil)
        var pieces: [String] = []
        for j in 1..<threshold {
            let stored = try keystores[j].importBundles([outputs[j].path], identity: identities[j])[0]
            let piece = try OutputFile(path: directory + "/piece\(j + 1)")
            try ReleasedPiece.release(stored, to: keystores[j].peer(named: identities[0].label.value),
                                      keystore: keystores[j], identity: identities[j], output: piece)
            try piece.commit()
            pieces.append(piece.path)
            try keystores[j].removeSecret(stored)
        }
        var recovered: UInt64 = 0
        let recoverSeconds = try time {
            _ = try SecretRecovery.recover(own, keystore: keystores[0], identity: identities[0], pieceFiles: pieces,
                                           password: { throw VaultError.passwordRequired },
                                           output: { recovered += UInt64($0.count) })
        }
        try keystores[0].removeSecret(own)
        guard recovered == bytes else { throw ValidationError("recovered \(recovered) bytes of \(bytes)") }
        let megabytes = Double(bytes) / 1e6
        print(String(format: "%5d MiB  share (split+encrypt) %7.1f MB/s   recover (verify+combine+decrypt) %7.1f MB/s   pieces/payload %.3f (bound n/k + 4 KiB·n: %.3f)",
                     mib, megabytes / shareSeconds, megabytes / recoverSeconds,
                     Double(pieceBytes) / Double(bytes), (Double(count) / Double(threshold)) + Double(4096 * count) / Double(bytes)))
    }

    /// Every holder serves on loopback; holders recover a 1 KiB secret in turn, asking all the
    /// others at once, then the first delivers a 100 MiB secret to the rest.
    /// Removes the scratch homes. With `--lan`, the holders' servers may still be closing
    /// their keystores as this runs, and SQLite deletes a `-wal` file when its last connection
    /// closes: a removal that meets a file vanishing under it stopped part way and left the
    /// homes behind (100 MB a run). It is tried again while anything is left.
    private static func removeScratch(_ base: String) {
        for attempt in 0..<20 where FileManager.default.fileExists(atPath: base) {
            if attempt > 0 { usleep(50_000) }
            try? FileManager.default.removeItem(atPath: base)
        }
    }

    private func measureLAN(base: String, keystores: [Keystore], identities: [Identity]) async throws {
        var ports: [Int] = []
        var servers: [Task<Void, Error>] = []
        for (keystore, identity) in zip(keystores, identities) {
            let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
            let server = PeerServer(keystore: keystore, identity: identity, confirm: nil) { _ in }
            servers.append(Task { try await server.run(host: "127.0.0.1", port: 0) { continuation.yield($0) } })
            var iterator = stream.makeAsyncIterator()
            ports.append(await iterator.next()!)
        }
        defer { servers.forEach { $0.cancel() } }
        func holders(of secret: StoredSecret, for requester: Int) throws -> [PieceGathering.Holder] {
            try (0..<count).filter { $0 != requester }.map { j in
                PieceGathering.Holder(peer: try keystores[requester].peer(named: identities[j].label.value),
                                      index: secret.header.index(of: identities[j].card.agreementKey)!,
                                      address: try PeerAddress("127.0.0.1:\(ports[j])"))
            }
        }

        // Latency: share 1 KiB among all, then each holder in turn recovers it.
        let small = try deal(bytes: 1024, to: base + "/small", keystores: keystores, identities: identities)
        var latencies: [Double] = []
        for run in 0..<20 {
            let requester = run % count
            let secret = try keystores[requester].secret(matching: small)
            let seconds = try await timeAsync {
                let pieces = await PieceGathering.gather(secret, from: try holders(of: secret, for: requester), identity: identities[requester],
                                                         directory: base, timeout: 10)
                // The files are deleted when released: keep them until recovery has read them.
                _ = try withExtendedLifetime(pieces) {
                    try SecretRecovery.recover(secret, keystore: keystores[requester], identity: identities[requester],
                                               pieceFiles: pieces.map(\.path), password: { throw VaultError.passwordRequired }, output: { _ in })
                }
            }
            latencies.append(seconds)
        }
        latencies.sort()
        print(String(format: "LAN recovery of a 1 KiB secret, %d of %d, asking %d holders at once: median %.1f ms, p90 %.1f ms, max %.1f ms (20 runs, no discovery: addresses given)",
                     threshold, count, count - 1, latencies[10] * 1000, latencies[17] * 1000, latencies[19] * 1000))

        // Delivery: holder 1 deals 100 MiB and delivers the other bundles at once.
        let directory = base + "/large"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let request = ShareRequest(type: .file, threshold: threshold, holders: identities.dropFirst().map { (label: $0.label, card: $0.card) })
        let outputs = try (0..<count).map { try OutputFile(path: directory + "/\($0 + 1).vshare") }
        let source = PatternSource(length: 100 << 20)
        let headers = try SecretDealer.share(request, content: source, dealer: identities[0], outputs: outputs)
        let bundleBytes = try FileManager.default.attributesOfItem(atPath: outputs[1].path)[.size] as! UInt64
        let seconds = try await timeAsync {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for j in 1..<count {
                    let peer = try keystores[0].peer(named: identities[j].label.value)
                    let address = try PeerAddress("127.0.0.1:\(ports[j])")
                    group.addTask { try await PeerClient.deliver(bundleAt: outputs[j].path, to: peer, at: address, identity: identities[0]) }
                }
                try await group.waitForAll()
            }
        }
        let perHolderIdeal = Double(headers[0].ciphertextLength) / Double(threshold)
        print(String(format: "LAN delivery of a 100 MiB payload to %d holders at once: %.2f s, %.1f MB/s of payload, %.1f MB/s on the wire; each holder receives %.1f MB, |C|/k = %.1f MB (ratio %.4f); holders verify and store before answering",
                     count - 1, seconds, Double(100 << 20) / 1e6 / seconds, Double(bundleBytes) * Double(count - 1) / 1e6 / seconds,
                     Double(bundleBytes) / 1e6, perHolderIdeal / 1e6, Double(bundleBytes) / perHolderIdeal))
    }

    /// Deals `bytes` among every holder (holder 1 the dealer) and has each store its share.
    private func deal(bytes: Int, to directory: String, keystores: [Keystore], identities: [Identity]) throws -> String {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let request = ShareRequest(type: .note, threshold: threshold, holders: identities.dropFirst().map { (label: $0.label, card: $0.card) })
        let outputs = try (0..<count).map { try OutputFile(path: directory + "/\($0 + 1).vshare") }
        let source = PatternSource(length: UInt64(bytes))
        let header = try SecretDealer.share(request, content: source, dealer: identities[0], outputs: outputs)[0]
        _ = try keystores[0].storeOwnBundle(at: outputs[0].path, identity: identities[0], name: nil)
        for j in 1..<count { try keystores[j].importBundles([outputs[j].path], identity: identities[j]) }
        return header.secretIDHex
    }

    private func timeAsync(_ body: () async throws -> Void) async rethrows -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        try await body()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    private func time(_ body: () throws -> Void) rethrows -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    private func peakResidentKiB() -> Int {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return usage.ru_maxrss
    }
}

/// A payload of any length from a repeated random block: measures vault, not the disk.
private struct PatternSource: ByteSource {
    private let block = (0..<(1 << 20)).map { _ in UInt8.random(in: 0...255) }
    private var left: UInt64

    init(length: UInt64) { left = length }

    mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let count = Int(min(UInt64(buffer.count), left, UInt64(block.count)))
        block.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: count) }
        left -= UInt64(count)
        return count
    }
}
