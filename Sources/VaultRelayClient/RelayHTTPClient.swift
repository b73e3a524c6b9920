import AsyncHTTPClient
import Foundation
import NIOCore
import NIOSSL
import VaultCore
import VaultRelayProtocol

/// The one HTTP client every relay connection shares.
///
/// Not `HTTPClient.shared`: its pool retries a refused connection until the request's
/// deadline, so a relay that is down held `vault send` for minutes. A relay that does not
/// answer should be reported at once and the others used; k of n is there for that.
enum RelayHTTPClient {
    /// The environment variable naming a PEM file of certificate authorities to trust for
    /// relays' TLS, besides the system's roots: for a relay whose certificate a private CA
    /// signed. TLS here keeps the traffic private; that the answers come from the pinned
    /// relay is proven by their signatures, whichever CA signed the certificate.
    static let trustVariable = "VAULT_RELAY_CA"

    /// The client, or why the trust file cannot be used (asked for, so never ignored).
    private static let configured = make(readTimeout: readTimeout)
    /// The client of waiting lists (`GET /v1/messages?wait=S`), which a relay answers only
    /// after up to S seconds of silence.
    private static let waiting = make(readTimeout: waitingReadTimeout)

    private static func make(readTimeout: TimeAmount) -> Result<HTTPClient, TrustFailure> {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.retryConnectionEstablishment = false
        // One connection a request in flight, up to 64 a relay (AsyncHTTPClient's default is
        // 8): a send makes one a relay, `vault-bench --relay` many.
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
        // A relay that stops sending for this long is stalled, whatever the body's size.
        configuration.timeout = .init(connect: connectTimeout, read: readTimeout)
        // A relay is addressed by its pinned URL; it has no business sending us elsewhere.
        configuration.redirectConfiguration = .disallow
        configuration.decompression = .disabled
        if let path = ProcessInfo.processInfo.environment[trustVariable], !path.isEmpty {
            let certificates: [NIOSSLCertificate]
            do {
                certificates = try NIOSSLCertificate.fromPEMFile(path)
            } catch {
                return .failure(TrustFailure(path: path))
            }
            guard !certificates.isEmpty else { return .failure(TrustFailure(path: path)) }
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.additionalTrustRoots = [.certificates(certificates)]
            configuration.tlsConfiguration = tls
        }
        return .success(HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration))
    }

    /// The shared client (the waiting one for a waiting list); throws when `VAULT_RELAY_CA`
    /// names a file of no certificates.
    static func client(relay: String, waiting: Bool = false) throws -> HTTPClient {
        switch waiting ? Self.waiting : configured {
        case .success(let client): return client
        case .failure(let failure): throw RelayError(relay: relay, code: "tls", words: failure.description)
        }
    }

    /// Sends `request` to the relay named `relay` (for errors); a relay that cannot be
    /// reached is a ``RelayError`` in words. `waiting` for a waiting list.
    static func execute(_ request: HTTPClientRequest, relay: String, deadline: TimeAmount = smallDeadline,
                        waiting: Bool = false) async throws -> HTTPClientResponse {
        let client = try client(relay: relay, waiting: waiting)
        do {
            return try await client.execute(request, timeout: deadline)
        } catch {
            // "interrupted": connected, then cut short; the relay may have taken the request.
            throw RelayError(relay: relay, code: ConnectionFailure.neverConnected(error) ? "unreachable" : "interrupted",
                             words: "cannot reach it: \(ConnectionFailure.words(for: error))")
        }
    }

    static let connectTimeout = TimeAmount.seconds(5)
    static let readTimeout = TimeAmount.seconds(30)
    /// A waiting list's silence: its longest wait and the small deadline's margin.
    static let waitingReadTimeout = TimeAmount.seconds(Int64(RelayAPI.waits.upperBound)) + smallDeadline
    /// The deadline of a request with a small body (`/card`, groups, lists, confirms).
    package static let smallDeadline = TimeAmount.seconds(30)
    /// The deadline of a streamed message share: generous, as the read timeout above
    /// already catches a relay that stalls.
    static let streamDeadline = TimeAmount.hours(1)

    struct TrustFailure: Error, CustomStringConvertible {
        let path: String
        var description: String {
            "\(trustVariable)=\(TerminalText.escaped(path)) is not a readable PEM file of certificates"
        }
    }
}
