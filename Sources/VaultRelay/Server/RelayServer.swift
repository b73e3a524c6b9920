import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOSSL
import NIOCore
import VaultCore
import VaultRelayProtocol

/// `vault relay serve`: a relay on Hummingbird 2, with its store and a sweeper.
public enum RelayServer {
    /// Where a running relay listens, and who it is.
    public struct Listening: Sendable {
        /// `http://host:port` or `https://host:port`, with the port it bound.
        public let url: String
        /// The relay's key card, which clients pin.
        public let card: KeyCard
    }

    /// Runs the relay until SIGINT or SIGTERM. `listening` is called once it accepts
    /// connections.
    public static func run(_ configuration: RelayConfiguration, listening: @escaping @Sendable (Listening) -> Void) async throws {
        let waiters = MessageWaiters()
        let store: any RelayStore
        switch configuration.store {
        case .sqlite(let path): store = try SQLiteRelayStore(path: path)
        case .postgres(let url): store = PostgresRelayStore(try PostgresRelayStore.Location(url: url), waiters: waiters)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await store.run() }
            group.addTask { try await serve(configuration, store: store, waiters: waiters, listening: listening) }
            // Whichever ends first (a signal stops the server; a store that fails stops all).
            try await group.next()
            group.cancelAll()
        }
    }

    private static func serve(_ configuration: RelayConfiguration, store: any RelayStore, waiters: MessageWaiters,
                              listening: @escaping @Sendable (Listening) -> Void) async throws {
        try await store.prepare()
        // The identity lives in the store, so processes sharing a store are one relay with
        // one card (Docs/RELAY.md, "Deployment").
        var secret = try await store.identitySecret {
            Identity.generate(label: RelayIdentity.label).1.withUnsafeBytes { Array($0) }
        }
        // The store's copy is the store's; this one is wiped once in locked memory.
        defer { secret.wipe() }
        let identity = try Identity(label: RelayIdentity.label, secret: SecureBytes(copying: secret))
        let relay = Relay(identity: identity, store: store, configuration: configuration, waiters: waiters)

        // A waiting list ends when its client goes away (MessageWaiters).
        let http1 = HTTPServerBuilder.http1(configuration: .init(additionalChannelHandlers: [ClientDeparture()]))
        let server: HTTPServerBuilder
        if let tls = configuration.tls {
            do {
                let chain = try NIOSSLCertificate.fromPEMFile(tls.certificate).map { NIOSSLCertificateSource.certificate($0) }
                let key = try NIOSSLPrivateKey(file: tls.key, format: .pem)
                server = try HTTPServerBuilder.tls(http1,
                                                   tlsConfiguration: TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key)))
            } catch {
                throw RelayStartFailure("cannot load the TLS certificate or key: \(error)")
            }
        } else {
            server = http1
        }
        // Nothing about requests is logged: not their content, not who made them, not from
        // where. Only failures to start or run reach the log.
        var logger = Logger(label: "vault-relay")
        logger.logLevel = .error
        let scheme = configuration.tls == nil ? "http" : "https"
        let application = Application(
            router: RelayRoutes.router(for: relay), server: server,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: nil),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? configuration.port
                let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
                listening(Listening(url: "\(scheme)://\(host):\(port)", card: identity.card))
            },
            logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await application.runService() }
            group.addTask { try await sweep(store, every: configuration.sweepInterval) }
            try await group.next()
            group.cancelAll()
        }
    }

    /// Deletes expired messages, old nonces and abandoned uploads, every `interval`
    /// seconds. Reads check expiry themselves; the sweep is what makes the bytes go.
    private static func sweep(_ store: any RelayStore, every interval: UInt64) async throws {
        while true {
            let now = Relay.now()
            _ = try? await store.sweep(now: now, staleBefore: now - min(now, RelayIdentity.abandonedUpload))
            try await Task.sleep(for: .seconds(interval))
        }
    }
}

/// Constants of a relay's own.
enum RelayIdentity {
    static let label = try! Label("relay")
    /// An upload not finished after this many seconds is dropped by the sweep.
    static let abandonedUpload: UInt64 = 3600
}
