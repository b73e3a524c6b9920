import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import VaultCore

/// The first connection to PostgreSQL, made once at start with a deadline, so that a wrong
/// host, port, user, password or database is said in words at once. The pool alone retries
/// a connection that fails, silently and for ever: `vault relay serve` then printed nothing
/// and hung until killed.
extension PostgresRelayStore {
    /// Connects and logs in once (within `connect_timeout`, 10 s by default), then lets go;
    /// throws ``RelayStartFailure`` naming what failed.
    func checkConnection() async throws {
        let tls: PostgresConnection.Configuration.TLS
        do {
            tls = location.requireTLS ? .require(try NIOSSLContext(configuration: .makeClientConfiguration())) : .disable
        } catch {
            throw RelayStartFailure("cannot set up TLS for PostgreSQL: \(TerminalText.escaped(String(describing: error)))")
        }
        var configuration = PostgresConnection.Configuration(host: location.host, port: location.port, username: location.user,
                                                             password: ProcessInfo.processInfo.environment["PGPASSWORD"],
                                                             database: location.database, tls: tls)
        configuration.options.connectTimeout = .seconds(location.connectTimeout)
        do {
            let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
            try? await connection.close()
        } catch {
            throw RelayStartFailure(Self.words(for: error, at: location))
        }
    }

    /// What failed, as an operator fixes it: the host and port (refused, timed out, not
    /// found), TLS, the login (user, password, pg_hba.conf), or the database.
    static func words(for error: any Error, at location: Location) -> String {
        let server = "PostgreSQL at \(location.server)"
        guard let failure = error as? PSQLError else { return "cannot connect to \(server): \(describe(error, location))" }
        switch failure.code {
        case .server:
            let state = failure.serverInfo?[.sqlState] ?? ""
            let message = TerminalText.escaped(failure.serverInfo?[.message] ?? "no reason given")
            switch state {
            case "28P01":
                return "\(server) refused user '\(location.user)': the password is wrong (it comes from PGPASSWORD)"
            case "28000":
                // The role does not exist, or pg_hba.conf has no line for it: the server's words say which.
                return "\(server) refused user '\(location.user)': \(message)"
            case "3D000":
                return "\(server) has no database '\(location.database)' (\(message))"
            default:
                return "\(server) refused the connection: \(message)"
            }
        case .authMechanismRequiresPassword:
            return "\(server) asks user '\(location.user)' for a password: set PGPASSWORD"
        case .unsupportedAuthMechanism, .saslError:
            return "\(server) could not log user '\(location.user)' in: its authentication method is not supported (use scram-sha-256)"
        case .sslUnsupported:
            return "\(server) does not offer TLS (add ?sslmode=disable only on a network you trust)"
        case .serverClosedConnection, .uncleanShutdown:
            return "\(server) closed the connection before logging in (is it PostgreSQL?)"
        default:
            return "cannot connect to \(server): \(failure.underlying.map { describe($0, location) } ?? "\(failure.code)")"
        }
    }

    private static func describe(_ error: any Error, _ location: Location) -> String {
        switch error {
        case ChannelError.connectTimeout:
            return "it did not answer within \(location.connectTimeout) s (is it a PostgreSQL server, on that port?)"
        case let error as NIOConnectionError:
            if let first = error.connectionErrors.first { return describe(first.error, location) }
            return "cannot resolve the host name '\(TerminalText.escaped(location.host))'"
        case let error as IOError:
            switch error.errnoCode {
            case ECONNREFUSED: return "the connection was refused (is it running, and on that port?)"
            case ETIMEDOUT: return "the connection timed out"
            case EHOSTUNREACH, ENETUNREACH: return "its network is unreachable"
            default: return String(cString: strerror(error.errnoCode)).lowercased()
            }
        case let error as NIOSSLError:
            if case .handshakeFailed(let inner) = error, String(describing: inner).contains("CERTIFICATE_VERIFY_FAILED") {
                return "its TLS certificate is not trusted here or does not name its host"
            }
            return "the TLS handshake failed"
        case is NIOSSLExtraError:
            return "its TLS certificate does not name its host"
        default:
            return TerminalText.escaped(String(describing: error))
        }
    }
}
