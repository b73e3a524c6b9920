import Foundation
import VaultCore

/// `vault scan --image` for recovery kits: the QR codes of every image, in any order, sorted
/// into holders' shares; with k whole shares of one secret, the secret is rebuilt there
/// and then, with no keystore (Docs/CLI.md, "vault scan").
enum KitScan {
    /// Whether any of the images' codes is a kit's; the codes read, by image.
    static func codes(in images: [String]) throws -> [(image: String, codes: [[UInt8]])] {
        try images.map { image in
            // A kit is read from photos and scans of paper.
            (image, QRScanner.scanClosely(try GrayImage(contentsOf: image)))
        }
    }

    /// Gathers the kit codes, tells what was found, and recovers into `output` (a file, or
    /// standard output when nil).
    static func recover(_ scanned: [(image: String, codes: [[UInt8]])], output: String?, force: Bool, passwordFile: String?) throws {
        var collector = KitCodes.Collector()
        var count = 0
        for (image, codes) in scanned {
            let kit = codes.filter(KitCodes.isKitCode)
            if kit.isEmpty { Terminal.standardError("vault: warning: \(TerminalText.escaped(image)) holds no recovery kit code") }
            for code in kit {
                do {
                    try collector.add(code)
                } catch {
                    throw VaultError.inFile(path: image, error)
                }
                count += 1
            }
        }
        let (complete, incomplete) = try collector.shares()
        for share in complete {
            Terminal.standardError("read holder \(share.header.holderIndex)'s kit ('\(TerminalText.escaped(share.holderName))') of secret \(share.header.secretIDHex.prefix(16)): \(share.header.threshold) of \(share.header.count) needed")
        }
        for part in incomplete {
            Terminal.standardError("vault: warning: holder \(part.index)'s kit of secret \(part.secretID.hex.prefix(16)): \(part.have) of its \(part.of) codes read")
        }
        guard !complete.isEmpty else {
            throw VaultError.invalidKit(incomplete.isEmpty ? "no kit code was read" : "no kit's codes are all there: codes are missing")
        }
        let secrets = Set(complete.map(\.header.secretIDHex))
        guard secrets.count == 1 else {
            throw CLIError.invalidInput("the kits are of \(secrets.count) secrets (\(secrets.sorted().map { String($0.prefix(16)) }.joined(separator: ", "))): scan one secret's kits at a time")
        }
        let header = complete[0].header
        let destination = try output.flatMap { $0 == "-" ? nil : try OutputFile(path: $0, replace: force, hiddenUntilCommit: true) }
        if destination == nil, header.type == .file, isatty(STDOUT_FILENO) == 1 {
            throw CLIError.unavailable("the secret is a file, not text, and standard output is a terminal", hint: "write it with -o FILE")
        }
        let password = try layerPasswordReadingFirst(file: passwordFile, prompt: "Password for the secret: ")
        let sink: (UnsafeRawBufferPointer) throws -> Void = { bytes in
            if let destination { try destination.write(bytes) } else { try writeStandardOutput(bytes) }
        }
        let presenter = PlaintextPresenter(type: header.type, toStandardOutput: destination == nil, sink: sink)
        let outcome = try KitRecovery.recover(complete, password: password, metadataReady: presenter.begin, output: presenter.write)
        try presenter.finish()
        try destination?.commit()
        for line in PlaintextPresenter.fieldLines(outcome.recovered.metadata) { Terminal.standardError(line) }
        Terminal.standardError("dealer's fingerprint \(outcome.dealer.fingerprint): compare it with the one printed on the kits")
        Terminal.standardError("recovered \(header.type) \(header.secretIDHex.prefix(16)) from the kits of holders "
            + outcome.used.map { String($0.header.holderIndex) }.joined(separator: ", ")
            + (destination.map { " into \(TerminalText.escaped($0.path))" } ?? ""))
    }
}
