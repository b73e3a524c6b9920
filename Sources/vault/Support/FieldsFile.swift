import Foundation
import VaultCore

/// `--fields FILE|-`: a secret's encrypted fields as `field: value` lines, so that they
/// need not be typed on the command line, which every local user can read while vault runs
/// (/proc/PID/cmdline). The names are those `vault receive` and `vault recover` print:
/// `username`, `url` (a password), `name`, `phone`, `email`, `address` (a contact);
/// `phone` and `email` may repeat. Blank lines and lines starting with `#` are skipped.
enum FieldsFile {
    /// The largest fields file read.
    static let maximumLength = 256 << 10

    static let names = ["username", "url", "name", "phone", "email", "address"]

    /// The fields in `path` (`-`: standard input), in order, as (name, value).
    static func read(_ path: String) throws -> [(name: String, value: String)] {
        let shown = path == "-" ? "standard input" : path
        let fd = path == "-" ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw VaultError.fileSystem(path: path, reason: String(cString: strerror(errno))) }
        defer { if fd != STDIN_FILENO { close(fd) } }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = Foundation.read(fd, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw VaultError.fileSystem(path: shown, reason: String(cString: strerror(errno))) }
            if count == 0 { break }
            bytes += chunk[0..<count]
            guard bytes.count <= maximumLength else {
                throw CLIError.invalidInput("\(shown): a fields file is at most \(ByteCount.limit(UInt64(maximumLength)))")
            }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw CLIError.invalidInput("\(shown): the fields are not UTF-8 text") }
        var fields: [(name: String, value: String)] = []
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw
            if line.trimmingCharacters(in: .whitespaces).isEmpty || line.hasPrefix("#") { continue }
            guard let colon = line.firstIndex(of: ":") else {
                throw CLIError.invalidInput("\(shown) line \(number + 1): write FIELD: VALUE (\(names.joined(separator: ", ")))")
            }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            guard names.contains(name) else {
                throw CLIError.invalidInput("\(shown) line \(number + 1): '\(TerminalText.escaped(name, limit: 40))' is not a field "
                                            + "(\(names.joined(separator: ", ")))")
            }
            guard !value.isEmpty else { throw CLIError.invalidInput("\(shown) line \(number + 1): \(name) has no value") }
            fields.append((name, value))
        }
        return fields
    }
}
