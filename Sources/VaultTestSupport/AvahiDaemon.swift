import Foundation

/// A private avahi-daemon inside a test's network namespace, as an independent mDNS stack:
/// its own D-Bus system bus (a socket in a temporary directory, so nothing on the host is
/// touched), and its own /run/avahi-daemon (a tmpfs in a private mount namespace, so a host
/// daemon's pid file does not stop it). Clients such as avahi-browse reach it through
/// `environment`. Both daemons are stopped when the value is released.
public final class AvahiDaemon: @unchecked Sendable {
    /// DBUS_SYSTEM_BUS_ADDRESS for avahi's clients, added to this process's environment.
    public let environment: [String: String]
    private let directory = TemporaryDirectory("vault-avahi")
    private let bus: BackgroundProcess
    private let daemon: BackgroundProcess

    /// Starts the bus and the daemon, restricted to `interface`, and waits until the daemon
    /// has joined the mDNS group.
    public init(in namespace: NetworkNamespace, interface: String) throws {
        let socket = directory.file("bus")
        try directory.write("bus.conf", Data("""
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>system</type>
              <listen>unix:path=\(socket)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_destination="*"/>
                <allow receive_sender="*"/>
              </policy>
            </busconfig>
            """.utf8))
        try directory.write("avahi.conf", Data("""
            [server]
            use-ipv4=yes
            use-ipv6=no
            allow-interfaces=\(interface)
            enable-dbus=yes
            [publish]
            publish-hinfo=no
            publish-workstation=no
            """.utf8))
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=\(socket)"
        self.environment = environment
        bus = try BackgroundProcess("/usr/bin/dbus-daemon", ["--config-file=\(directory.file("bus.conf"))", "--nofork", "--print-address"],
                                    environment: environment, logPath: directory.file("bus.log"))
        try bus.waitFor("unix:path=")
        let script = "mkdir -p /run/avahi-daemon && mount -t tmpfs tmpfs /run/avahi-daemon && exec avahi-daemon --no-drop-root --no-chroot --no-rlimits -f \"$0\""
        let (tool, arguments) = namespace.wrap("/usr/bin/unshare", ["--mount", "--propagation", "private", "/bin/sh", "-c", script, directory.file("avahi.conf")])
        daemon = try BackgroundProcess(tool, arguments, environment: environment, logPath: directory.file("avahi.log"))
        try daemon.waitFor("Server startup complete")
    }

    deinit {
        daemon.stop()
        bus.stop(SIGKILL)  // dbus-daemon ignores SIGTERM
    }
}
