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
        /// The connections it holds at most, after its file descriptor limit.
        public let connections: Int
        /// Its file descriptor limit.
        public let files: Int
    }

    /// Runs the relay until SIGINT or SIGTERM. `listening` is called once it accepts
    /// connections.
    public static func run(_ configuration: RelayConfiguration, listening: @escaping @Sendable (Listening) -> Void) async throws {
        var configuration = configuration
        // Every connection is a descriptor: at the soft limit of 1024 a few hundred slow
        // clients used them all (M3). The hard limit is what the operator allows (systemd's
        // LimitNOFILE=); a margin is kept for the store, logs and the listener.
        let files = raiseFileLimit()
        configuration.connections.total = max(1, min(configuration.connections.total, files - 128))
        let waiters = MessageWaiters()
        let store: any RelayStore
        switch configuration.store {
        case .sqlite(let path): store = try SQLiteRelayStore(path: path)
        case .postgres(let url): store = PostgresRelayStore(try PostgresRelayStore.Location(url: url), waiters: waiters)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await store.run() }
            group.addTask { [configuration] in try await serve(configuration, files: files, store: store, waiters: waiters, listening: listening) }
            // Whichever ends first (a signal stops the server; a store that fails stops all).
            try await group.next()
            group.cancelAll()
        }
    }

    private static func serve(_ configuration: RelayConfiguration, files: Int, store: any RelayStore, waiters: MessageWaiters,
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
        var addressSecret = try await store.addressSecret { SecureRandom().bytes(32) }
        defer { addressSecret.wipe() }
        let relay = Relay(identity: identity, store: store, configuration: configuration, waiters: waiters,
                          addressSecret: SecureBytes(copying: addressSecret))

        // A waiting list ends when its client goes away (MessageWaiters); every connection
        // is held to the caps and deadlines (ConnectionGuard).
        let table = ConnectionTable(limits: configuration.connections)
        let limits = configuration.connections
        let http1 = HTTPServerBuilder.http1(configuration: .init(additionalChannelHandlers: [
            ClientDeparture(), ConnectionGuard(table: table, limits: limits),
        ]))
        let server: HTTPServerBuilder
        if let tls = configuration.tls {
            // Each file named, with what is wrong with it: NIOSSL's errors name neither.
            func load<T>(_ what: String, _ path: String, _ body: () throws -> T) throws -> T {
                guard access(path, R_OK) == 0 else { throw RelayStartFailure("cannot read the TLS \(what) \(path): \(String(cString: strerror(errno)))") }
                do { return try body() } catch { throw RelayStartFailure("the TLS \(what) \(path) is not a \(what) in PEM") }
            }
            let chain = try load("certificate", tls.certificate) {
                let chain = try NIOSSLCertificate.fromPEMFile(tls.certificate)
                guard !chain.isEmpty else { throw RelayStartFailure("empty") }
                return chain.map { NIOSSLCertificateSource.certificate($0) }
            }
            let key = try load("key", tls.key) { try NIOSSLPrivateKey(file: tls.key, format: .pem) }
            do {
                var tlsConfiguration = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
                // NIOSSL waits 5 s for a peer's close_notify before closing anyway, so a client
                // that connected and went quiet held a stopping relay that long. Every answer
                // is framed (Content-Length), so a peer's close_notify protects nothing here.
                tlsConfiguration.shutdownTimeout = RelayIdentity.tlsShutdownWait
                server = try HTTPServerBuilder.tls(http1, tlsConfiguration: tlsConfiguration)
            } catch {
                throw RelayStartFailure("cannot use the TLS certificate \(tls.certificate) with the key \(tls.key): \(error)")
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
                listening(Listening(url: "\(scheme)://\(host):\(port)", card: identity.card, connections: limits.total, files: files))
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

/// Raises the soft limit on open files to the hard limit, and returns the limit now.
private func raiseFileLimit() -> Int {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
    if limit.rlim_cur < limit.rlim_max {
        var raised = limit
        raised.rlim_cur = limit.rlim_max
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
    }
    return Int(clamping: limit.rlim_cur)
}

/// Constants of a relay's own.
enum RelayIdentity {
    /// How long a TLS connection being closed waits for the peer's close_notify.
    static let tlsShutdownWait = TimeAmount.milliseconds(500)

    static let label = try! Label("relay")
    /// An upload not finished after this many seconds is dropped by the sweep.
    static let abandonedUpload: UInt64 = 3600
}
