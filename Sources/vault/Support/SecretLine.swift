import Foundation
import VaultCore

/// A secret the user gives a command (a link, an invite): as an argument, from standard
/// input (`-`), or typed on the terminal without echo when none is given. The argument form
/// is allowed but not suggested: a command line is readable by every local user
/// (/proc/PID/cmdline) while vault runs.
enum SecretLine {
    static func read(_ argument: String?, what: String, prompt: String, longest: Int, hint: String) throws -> String {
        switch argument {
        case "-":
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while bytes.count <= longest, !bytes.contains(0x0A) {
                let count = Glibc.read(STDIN_FILENO, &chunk, chunk.count)
                if count < 0 && errno == EINTR { continue }
                guard count >= 0 else { throw VaultError.fileSystem(path: "standard input", reason: String(cString: strerror(errno))) }
                if count == 0 { break }
                bytes += chunk[0..<count]
            }
            let line = bytes.prefix { $0 != 0x0A }
            guard !line.isEmpty else { throw CLIError.invalidInput("standard input holds no \(what)") }
            return String(decoding: line, as: UTF8.self)
        case let text?:
            // Given as an argument anyway: out of the process list for the rest of the run.
            ArgumentHiding.hide(text)
            return text
        case nil:
            do {
                let typed = try Terminal.passphrase(prompt: prompt)
                guard typed.count > 0 else { throw CLIError.invalidInput("no \(what) was typed") }
                return typed.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            } catch CLIError.noTerminal {
                throw CLIError.unavailable("no \(what) given, and no terminal to ask for it on", hint: hint)
            }
        }
    }
}
