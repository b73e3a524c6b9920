import ArgumentParser
import Foundation
import VaultCore

/// `vault bench`: the figures issue 3 asks for, printed one line per case. Hidden from help.
struct Bench: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure share and recover throughput, piece overhead and peak memory.",
        shouldDisplay: false)

    @Option(help: ArgumentHelp("Payload sizes in MiB.", valueName: "mib"))
    var sizes: [Int] = [1, 64, 1024]

    @Option(name: .customShort("k"), help: "Threshold.")
    var threshold = 3

    @Option(name: .customShort("n"), help: "Holders.")
    var count = 5

    @Option(help: ArgumentHelp("Scratch directory (default: the system's temporary directory).", valueName: "dir"))
    var scratch: String?

    func run() throws {
        let base = (scratch ?? NSTemporaryDirectory()) + "/vault-bench-\(getpid())"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        print("vault bench: \(threshold) of \(count), \(ProcessInfo.processInfo.activeProcessorCount) cores")
        print(String(format: "libsodium secretstream alone: %.0f MB/s (one core, 64 KiB chunks)", Calibration.secretStreamMBps()))

        // Holders with their own keystores, all trusting each other.
        let labels = (1...count).map { "holder\($0)" }
        let homes = labels.map { VaultHome(directory: base + "/" + $0) }
        let keystores = try zip(homes, labels).map { try Keystore.create(home: $0, label: Label($1), passphrase: nil) }
        let identities = try keystores.map { try $0.unlock(passphrase: nil) }
        for (i, keystore) in keystores.enumerated() {
            for (j, identity) in identities.enumerated() where i != j {
                try keystore.addPeer(identity.card, label: identity.label, address: nil)
            }
        }
        for mib in sizes {
            try measure(mib: mib, base: base, keystores: keystores, identities: identities)
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
        var source = PatternSource(length: bytes)
        let shareSeconds = try time { _ = try SecretDealer.share(request, content: &source, dealer: identities[0], outputs: outputs) }
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
        guard recovered == bytes else { throw CLIError.invalidInput("recovered \(recovered) bytes of \(bytes)") }
        let megabytes = Double(bytes) / 1e6
        print(String(format: "%5d MiB  share (split+encrypt) %7.1f MB/s   recover (verify+combine+decrypt) %7.1f MB/s   pieces/payload %.3f (bound n/k + 4 KiB·n: %.3f)",
                     mib, megabytes / shareSeconds, megabytes / recoverSeconds,
                     Double(pieceBytes) / Double(bytes), (Double(count) / Double(threshold)) + Double(4096 * count) / Double(bytes)))
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
