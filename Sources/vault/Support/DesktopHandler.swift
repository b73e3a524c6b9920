import Foundation

/// The desktop's handler for `vault://` URLs: a .desktop file that runs `vault url --open
/// %u`, registered with `xdg-mime` (xdg-utils), and the way back out.
enum DesktopHandler {
    static let fileName = "vault-url.desktop"
    static let mimeType = "x-scheme-handler/vault"

    static var home: String { ProcessInfo.processInfo.environment["HOME"] ?? NSHomeDirectory() }

    /// `$XDG_DATA_HOME/applications`, else `~/.local/share/applications`.
    static var applications: String {
        let data = ProcessInfo.processInfo.environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.local/share"
        return data + "/applications"
    }

    /// Where xdg-mime records defaults: `$XDG_CONFIG_HOME/mimeapps.list`, else `~/.config`;
    /// older xdg-utils also used the applications directory.
    static var associationFiles: [String] {
        let config = ProcessInfo.processInfo.environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.config"
        return [config + "/mimeapps.list", applications + "/mimeapps.list"]
    }

    /// The desktop entry that hands `vault://` URLs to the binary at `vault`: what
    /// `--install-handler` writes for one user, and what scripts/install and scripts/package
    /// install system-wide (`vault url --print-handler PATH`).
    static func entry(running vault: String) -> String {
        // The handler runs in a terminal: every request must be confirmed by the person.
        """
        [Desktop Entry]
        Type=Application
        Name=vault
        Comment=Handle vault:// x-callback-url requests (encrypt, decrypt)
        Exec=\(desktopQuoted(vault)) url --open %u
        MimeType=\(mimeType);
        NoDisplay=true
        Terminal=true

        """
    }

    static func install() throws {
        guard let xdgMime = executable("xdg-mime") else {
            throw CLIError.unavailable("xdg-mime is not installed", hint: "install xdg-utils (apt-get install xdg-utils)")
        }
        let vault = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        try FileManager.default.createDirectory(atPath: applications, withIntermediateDirectories: true)
        let path = applications + "/" + fileName
        try Data(entry(running: vault).utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        let status = run(xdgMime, ["default", fileName, mimeType])
        guard status == 0 else {
            try? FileManager.default.removeItem(atPath: path)
            throw CLIError.unavailable("xdg-mime default failed (status \(status)); nothing was installed", hint: "check that xdg-utils works here")
        }
        Terminal.standardError("installed \(path), running \(vault)")
        Terminal.standardError("registered it for \(mimeType); check with: xdg-mime query default \(mimeType)")
    }

    static func uninstall() throws {
        let path = applications + "/" + fileName
        var removed = false
        if FileManager.default.fileExists(atPath: path) {
            try FileManager.default.removeItem(atPath: path)
            removed = true
        }
        for list in associationFiles {
            guard let text = try? String(contentsOfFile: list, encoding: .utf8) else { continue }
            let kept = text.split(separator: "\n", omittingEmptySubsequences: false).filter {
                !($0.hasPrefix(mimeType + "=") && $0.contains(fileName))
            }.joined(separator: "\n")
            if kept != text {
                try Data(kept.utf8).write(to: URL(fileURLWithPath: list), options: .atomic)
                removed = true
            }
        }
        Terminal.standardError(removed ? "removed the vault:// handler" : "no vault:// handler was installed")
    }

    /// Opens `url` with xdg-open; nil on success, else why not.
    static func open(_ url: String) -> String? {
        guard let xdgOpen = executable("xdg-open") else { return "xdg-open is not installed" }
        let environment = ProcessInfo.processInfo.environment
        guard environment["DISPLAY"] != nil || environment["WAYLAND_DISPLAY"] != nil else {
            return "no desktop session: DISPLAY and WAYLAND_DISPLAY are unset"
        }
        let status = run(xdgOpen, [url])
        return status == 0 ? nil : "xdg-open failed with status \(status)"
    }

    /// Whether other users are kept from reading this user's command lines: /proc mounted
    /// with `hidepid=1|2` (or `noaccess|invisible`). Without it, any local user can read a
    /// URL passed to xdg-open (and to the browser it starts) in /proc/PID/cmdline.
    static var commandLinesHidden: Bool {
        guard let table = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return false }
        for line in table.split(separator: "\n") {
            let fields = line.split(separator: " ")
            // mount point is field 5; after " - ": type, source, super options.
            guard fields.count > 4, fields[4] == "/proc", let dash = fields.firstIndex(of: "-"), dash + 3 < fields.count,
                  fields[dash + 1] == "proc" else { continue }
            let options = fields[dash + 3].split(separator: ",")
            return options.contains { ["hidepid=1", "hidepid=2", "hidepid=noaccess", "hidepid=invisible"].contains(String($0)) }
        }
        return false
    }

    private static func executable(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    private static func run(_ executable: String, _ arguments: [String]) -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch { return -1 }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// A path as the desktop entry spec quotes Exec arguments.
    private static func desktopQuoted(_ path: String) -> String {
        guard path.contains(where: { " \t\"'\\$`".contains($0) }) else { return path }
        let escaped = path.replacingOccurrences(of: "\\", with: "\\\\\\\\").replacingOccurrences(of: "\"", with: "\\\\\"")
            .replacingOccurrences(of: "$", with: "\\\\$").replacingOccurrences(of: "`", with: "\\\\`")
        return "\"\(escaped)\""
    }
}
