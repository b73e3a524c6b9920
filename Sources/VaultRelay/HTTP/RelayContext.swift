import Hummingbird
import NIOCore

/// A request's context: Hummingbird's, the client's address for the rate limit (never
/// logged or stored), and its connection, which a waiting request watches.
struct RelayContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?
    let connection: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
        connection = source.channel
    }

    /// The address as bytes for the rate limiter's table: the IP without the port.
    var addressKey: [UInt8] { Array((remoteAddress?.ipAddress ?? "unknown").utf8) }
}
