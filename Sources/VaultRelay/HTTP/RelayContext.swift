import Hummingbird
import NIOCore

/// A request's context: Hummingbird's, and the client's address for the rate limit (never
/// logged or stored).
struct RelayContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }

    /// The address as bytes for the rate limiter's table: the IP without the port.
    var addressKey: [UInt8] { Array((remoteAddress?.ipAddress ?? "unknown").utf8) }
}
