import Foundation
import NIOCore
import NIOPosix
import VaultCore

extension NetError {
    /// A failure of the network stack (NIO, the socket layer) in words: the system's reason
    /// ("connection refused"), never NIO's structure. Nil if `error` is not one.
    public static func reason(of error: any Error) -> String? {
        switch error {
        case let connection as NIOConnectionError:
            if let first = connection.connectionErrors.first { return reason(of: first.error) }
            if connection.dnsAError != nil || connection.dnsAAAAError != nil { return "the host name does not resolve" }
            return "no address to connect to"
        case let io as IOError:
            return String(cString: strerror(io.errnoCode)).lowercased()
        case is SocketAddressError.UnknownHost:
            return "the host name does not resolve"
        case let address as SocketAddressError:
            switch address {
            case .unixDomainSocketPathTooLong: return "the socket path is too long"
            case .failedToParseIPString: return "not an IP address"
            default: return "the address is not supported"
            }
        case let channel as ChannelError:
            switch channel {
            case .connectTimeout: return "connection timed out"
            case .ioOnClosedChannel, .alreadyClosed, .outputClosed, .inputClosed, .eof: return "the connection closed"
            default: return "the connection failed"
            }
        default:
            return nil
        }
    }

    /// Any error in words: the network stack's as ``reason(of:)`` says, vault's own and the
    /// file system's as ``VaultError/words(for:)`` does.
    public static func words(for error: any Error) -> String {
        reason(of: error).map { "the connection failed: \($0)" } ?? VaultError.words(for: error)
    }

    /// `error` as a ``NetError`` when the network stack raised it on an open connection;
    /// any other error unchanged.
    static func lifting(_ error: any Error) -> any Error {
        guard !(error is NetError), let reason = reason(of: error) else { return error }
        return NetError.connectionLost(reason)
    }
}
