import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import VaultCore

/// Why a relay could not be reached, in words a user can act on, instead of the text of
/// SwiftNIO's error types ("connection reset (error set): Connection refused (errno: 111)").
enum ConnectionFailure {
    static func words(for error: any Error) -> String {
        switch error {
        case let error as IOError:
            return reason(errno: error.errnoCode)
        case let error as NIOConnectionError:
            if let first = error.connectionErrors.first { return words(for: first.error) }
            return "cannot resolve its host name"
        case let error as HTTPClientError:
            switch error {
            case .connectTimeout: return "it did not accept a connection within \(seconds(RelayHTTPClient.connectTimeout)) s"
            case .readTimeout: return "it stopped answering for \(seconds(RelayHTTPClient.readTimeout)) s"
            case .deadlineExceeded: return "it did not finish answering in time"
            case .remoteConnectionClosed: return "it closed the connection"
            case .tlsHandshakeTimeout: return "its TLS handshake did not finish in time"
            default: return TerminalText.escaped(String(describing: error))
            }
        case let error as NIOSSLError:
            // A certificate that no trusted CA signed, or one that does not name the host
            // of the pinned URL: BoringSSL reports both as a failed verification.
            if case .handshakeFailed(let inner) = error, String(describing: inner).contains("CERTIFICATE_VERIFY_FAILED") {
                return "its TLS certificate is not trusted here or does not name its host (for a private CA, set \(RelayHTTPClient.trustVariable) to its certificate)"
            }
            return "the TLS handshake failed (is it TLS, or plain HTTP?)"
        case is NIOSSLExtraError:
            return "its TLS certificate does not name its host"
        case ChannelError.connectTimeout:
            return "it did not accept a connection within \(seconds(RelayHTTPClient.connectTimeout)) s"
        default:
            return VaultError.words(for: error)
        }
    }

    /// Whether `error` came before any request could reach the relay: no connection (refused,
    /// unreachable, timed out, no such host) or no TLS session. The relay then holds
    /// nothing of the request; after a connection, a request cut short may have been
    /// taken whole.
    static func neverConnected(_ error: any Error) -> Bool {
        switch error {
        case let error as IOError:
            return [ECONNREFUSED, EHOSTUNREACH, ENETUNREACH].contains(error.errnoCode)
        case is NIOConnectionError, is NIOSSLExtraError:
            return true
        case let error as NIOSSLError:
            // A failed handshake sent no request; other TLS errors (an unclean shutdown)
            // may come after one.
            if case .handshakeFailed = error { return true }
            return false
        case let error as HTTPClientError:
            return error == .connectTimeout || error == .tlsHandshakeTimeout
        case ChannelError.connectTimeout:
            return true
        default:
            return false
        }
    }

    private static func reason(errno code: Int32) -> String {
        switch code {
        case ECONNREFUSED: return "the connection was refused (is it running?)"
        case ECONNRESET: return "the connection was reset"
        case ETIMEDOUT: return "the connection timed out"
        case EHOSTUNREACH, ENETUNREACH: return "its network is unreachable"
        default: return String(cString: strerror(code)).lowercased()
        }
    }

    private static func seconds(_ amount: TimeAmount) -> Int64 { amount.nanoseconds / 1_000_000_000 }
}
