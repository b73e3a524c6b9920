import ArgumentParser
import Foundation
import VaultCore
import VaultNet

struct Nearby: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List vault servers announced nearby by mDNS, and which of them you trust.")

    @OptionGroup var home: HomeOption

    @Option(help: ArgumentHelp("Seconds to listen.", valueName: "s"))
    var timeout: Double = 3

    @Flag(help: "Print JSON.")
    var json = false

    struct Entry: Encodable {
        let instance: String
        let addresses: [String]
        let port: UInt16
        let fingerprint: String?
        let trustedAs: String?
    }

    func run() async throws {
        let peers = (try? home.openKeystore().peers()) ?? []
        let services = try await MDNSBrowser.browse(timeout: max(0.5, min(timeout, 60)))
        let entries = services.map { service in
            Entry(instance: service.instance, addresses: service.addresses, port: service.port, fingerprint: service.fingerprint,
                  trustedAs: peers.first { $0.card.shortFingerprint == service.fingerprint }?.label.value)
        }
        if json { return try printJSON(entries) }
        guard !entries.isEmpty else {
            Terminal.standardError("no vault servers found within \(timeout) s")
            return
        }
        for entry in entries {
            let trust = entry.trustedAs.map { "trusted as '\($0)'" } ?? "not trusted"
            // Instance names and TXT records come from any machine on the LAN.
            print("\(TerminalText.escaped(entry.instance))  \(entry.addresses.map { "\($0):\(entry.port)" }.joined(separator: ", "))  "
                + "fp \(TerminalText.escaped(entry.fingerprint ?? "-"))  \(trust)")
        }
    }
}
