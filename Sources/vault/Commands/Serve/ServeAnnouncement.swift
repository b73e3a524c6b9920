import Foundation
import VaultNet

/// The mDNS responder of a running server, started once the port is known.
final class ResponderBox: @unchecked Sendable {
    private var responder: MDNSResponder?
    private let lock = NSLock()

    func start(_ responder: MDNSResponder) {
        lock.withLock { self.responder = responder }
        Task {
            do {
                try await responder.start()
                Terminal.standardError("vault serve: announced as _vault._tcp.local. (fingerprint \(responder.fingerprintPrefix))")
            } catch {
                Terminal.standardError("vault serve: not announced by mDNS: \(Report.words(for: error))")
            }
        }
    }

    /// Sends the goodbye.
    func stop() async {
        if let responder = lock.withLock({ responder }) { await responder.stop() }
    }
}

/// Parses a dotted IPv4 address; `0.0.0.0` and anything else is not one to announce.
enum SocketAddressBytes {
    static func ipv4(_ text: String) throws -> [UInt8] {
        let parts = text.split(separator: ".").compactMap { UInt8($0) }
        guard parts.count == 4, text.split(separator: ".").count == 4, parts != [0, 0, 0, 0] else {
            throw CLIError.invalidInput("not an IPv4 address")
        }
        return parts
    }
}
