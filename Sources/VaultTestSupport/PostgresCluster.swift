import Foundation

/// A throwaway PostgreSQL cluster (Debian's `postgresql`): made by initdb in a temporary
/// directory, run as the unprivileged user `nobody` (PostgreSQL refuses to run as root) on a
/// free loopback port, with trust authentication for the superuser `vault`, and stopped
/// (fast shutdown) when the value is released.
public final class PostgresCluster: @unchecked Sendable {
    /// The port it listens on, on 127.0.0.1.
    public let port: Int
    /// `postgres://vault@127.0.0.1:PORT/postgres`.
    public var url: String { "postgres://vault@127.0.0.1:\(port)/postgres" }
    private let directory = TemporaryDirectory("vault-postgres")
    private let bin: String
    private var server: BackgroundProcess?

    public init() throws {
        guard let version = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql"))?.sorted().last else {
            throw Self.failure("PostgreSQL is not installed (scripts/test installs Debian's postgresql)")
        }
        bin = "/usr/lib/postgresql/\(version)/bin"
        port = try Self.freePort()
        // nobody reaches its data directory through the temporary one.
        chmod(directory.path, 0o711)
        let data = directory.file("data")
        mkdir(data, 0o700)
        guard let nobody = getpwnam("nobody") else { throw Self.failure("there is no user nobody") }
        chown(data, nobody.pointee.pw_uid, nobody.pointee.pw_gid)
        // setpriv execs in place, so the process signalled at the end is postgres itself
        // (runuser would stand between, and not pass SIGINT on).
        let asNobody = ["--reuid", String(nobody.pointee.pw_uid), "--regid", String(nobody.pointee.pw_gid), "--clear-groups", "--"]
        let initdb = try ProcessRunner.run("/usr/bin/setpriv", asNobody + [bin + "/initdb", "-D", data, "-U", "vault",
                                                                           "--auth=trust", "-E", "UTF8", "--no-sync"],
                                           environment: ["LANG": "C", "HOME": data])
        guard initdb.status == 0 else { throw Self.failure("initdb failed: \(initdb.stderr)") }
        let server = try BackgroundProcess("/usr/bin/setpriv", asNobody + [
            bin + "/postgres", "-D", data, "-p", String(port), "-k", data,
            "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=100",
        ], environment: ["LANG": "C", "HOME": data], logPath: directory.file("postgres.log"))
        try server.waitFor("database system is ready to accept connections", timeout: 60)
        self.server = server
    }

    deinit { server?.stop(SIGINT) }

    /// Runs one SQL statement with psql and returns its unaligned output.
    public func sql(_ statement: String) throws -> String {
        let result = try ProcessRunner.run(bin + "/psql", ["-h", "127.0.0.1", "-p", String(port), "-U", "vault", "-d", "postgres",
                                                           "-tAq", "-v", "ON_ERROR_STOP=1", "-c", statement])
        guard result.status == 0 else { throw Self.failure("psql: \(result.stderr)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A loopback port nothing listens on now.
    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw failure("no free loopback port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func failure(_ words: String) -> NSError {
        NSError(domain: "PostgresCluster", code: 1, userInfo: [NSLocalizedDescriptionKey: words])
    }
}
