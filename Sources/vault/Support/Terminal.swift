import Foundation
import VaultCore

/// Where the command line meets the person: prompts go to the controlling terminal
/// (/dev/tty), never to stdout, so that data on stdout stays clean and stdin stays free for
/// piped input.
enum Terminal {
    /// Where this task's lines go instead of standard error: the `vault unlock` a serve
    /// recovers a key for (``KeyAgent``'s request 7), which prints them on its own.
    @TaskLocal static var lines: (@Sendable (String) -> Void)?

    /// Writes a line on standard error. While a question waits on the terminal that standard
    /// error also is (`vault serve`'s log beside its questions), the line goes above it and
    /// the question is shown again below, so that what waits for an answer is always the
    /// last thing on the screen.
    static func standardError(_ line: String) {
        if let lines { return lines(line) }
        ProgressLine.clearing {
            if let asking = OpenQuestion.text, isatty(STDERR_FILENO) == 1 {
                FileHandle.standardError.write(Data(("\r\u{1B}[K" + line + "\n" + asking).utf8))
            } else {
                FileHandle.standardError.write(Data((line + "\n").utf8))
            }
        }
    }

    /// The question on the terminal now, as shown (nil when none waits).
    private enum OpenQuestion {
        private static let lock = NSLock()
        nonisolated(unsafe) private static var shown: String?
        static var text: String? {
            get { lock.withLock { shown } }
            set { lock.withLock { shown = newValue } }
        }
    }

    /// Colour only on a terminal, and never when NO_COLOR is set (no-color.org).
    static var stdoutWantsColor: Bool {
        let noColor = ProcessInfo.processInfo.environment["NO_COLOR"].map { !$0.isEmpty } ?? false
        return !noColor && isatty(STDOUT_FILENO) == 1
    }

    /// Whether there is a controlling terminal to ask on.
    static var isAvailable: Bool { TTY() != nil }

    /// Asks a yes/no question on the terminal. Without one, refuses: a question nobody can
    /// answer must not default to yes.
    /// `details` are shown first, and only when the question can be asked.
    static func confirm(_ question: String, details: [String] = [], what: String) throws -> Bool {
        try confirm(question, details: details, what: what, while: { true }) ?? false
    }

    /// Asks a yes/no question that may be settled elsewhere meanwhile (vault serve's piece
    /// requests, approved from another shell): `stillOpen` is checked while the question
    /// waits, and once it is false the question is withdrawn and nil returned. A question
    /// left standing would take the next answer typed, meant for the next question.
    /// With `retype`, a yes counts only once the person also types that word (a label) at a
    /// second prompt: for a release that a reflexive "y" must not give away. Nil when the
    /// question was answered elsewhere, or the word typed was not that one.
    static func confirm(_ question: String, details: [String] = [], what: String, retype: String? = nil,
                        while stillOpen: () -> Bool) throws -> Bool? {
        guard let tty = TTY() else { throw CLIError.confirmationRequired(what: what) }
        // One question at a time in this process (vault serve may have several to ask), and
        // nothing typed before the question answers it: a "y" meant for one question must
        // never be read by another.
        return questions.withLock { ProgressLine.pausing {
            guard stillOpen() else { return nil }
            details.forEach(standardError)
            tty.discardTypedAhead()
            defer { OpenQuestion.text = nil }
            OpenQuestion.text = question + " [y/N] "
            tty.write(question + " [y/N] ")
            guard let answer = tty.readLine(while: stillOpen) else {
                tty.write("(answered elsewhere)\n")
                return nil
            }
            let word = answer.trimmingCharacters(in: .whitespaces).lowercased()
            guard word == "y" || word == "yes" else { return false }
            guard let retype else { return true }
            OpenQuestion.text = "Type '\(TerminalText.escaped(retype))' to confirm: "
            tty.write("Type '\(TerminalText.escaped(retype))' to confirm: ")
            guard let typed = tty.readLine(while: stillOpen) else {
                tty.write("(answered elsewhere)\n")
                return nil
            }
            // A slip of the keyboard decides nothing either way: the request still waits.
            guard Label.sameName(typed.trimmingCharacters(in: .whitespaces), retype) else {
                tty.write("Not confirmed: that is not '\(TerminalText.escaped(retype))'; it still waits ('vault approve' or 'vault deny').\n")
                return nil
            }
            return true
        } }
    }

    private static let questions = NSLock()

    /// Asks for a line of text on the terminal (echoed); nil without a terminal.
    static func ask(_ prompt: String) -> String? {
        guard let tty = TTY() else { return nil }
        return ProgressLine.pausing {
            tty.write(prompt)
            return tty.readLine()?.trimmingCharacters(in: .whitespaces)
        }
    }

    /// Reads a passphrase on the terminal without echo. With `confirm`, asks twice, and
    /// asks again when the two differ or the first is empty, up to ``PassphraseRules/tries``
    /// times. With `guarding` (what a guessed passphrase would give away), one shorter than
    /// ``PassphraseRules/advisedLength`` is used only once the person confirms it.
    static func passphrase(prompt: String, confirm: Bool = false, guarding: String? = nil) throws -> SecureBytes {
        guard let tty = TTY() else {
            throw CLIError.noTerminal(purpose: "a passphrase", alternative: "pass --passphrase-file FILE")
        }
        // A progress line stays off the terminal while the person types.
        return try ProgressLine.pausing {
            guard confirm else { return try tty.readSecret(prompt: prompt) }
            var failure = CLIError.passphrasesDiffer
            for _ in 1...PassphraseRules.tries {
                let first = try tty.readSecret(prompt: prompt)
                if first.count == 0 {
                    tty.write("It is empty; try again.\n")
                    failure = .invalidInput("the passphrase is empty")
                    continue
                }
                if let guarding, let short = PassphraseRules.shortness(first) {
                    tty.write("\(short): \(guarding).\n")
                    tty.discardTypedAhead()
                    tty.write("Use it anyway? [y/N] ")
                    let answer = tty.readLine()?.trimmingCharacters(in: .whitespaces).lowercased()
                    guard answer == "y" || answer == "yes" else {
                        failure = .invalidInput("no passphrase was chosen")
                        continue
                    }
                }
                let second = try tty.readSecret(prompt: "Repeat it: ")
                if first.constantTimeEquals(second) { return first }
                tty.write("They do not match; try again.\n")
                failure = .passphrasesDiffer
            }
            throw failure
        }
    }

    /// The most a note typed on the terminal may be.
    static let largestTypedNote = 1 << 20

    /// Reads what the person types on standard input, a terminal, until Ctrl-D, after
    /// telling them so: all of it, into locked memory, before any work starts. So nothing
    /// is drawn over the typing (a progress line would be, while work waits on the reads),
    /// and a typed secret only ever sits in memory that is wiped.
    static func typedNote(_ what: String) throws -> SecureBytes {
        tell("Type \(what), then press Ctrl-D at the start of a line:")
        return try ProgressLine.pausing {
            var buffer = SecureBytes(count: 4096)
            var length = 0
            while true {
                if length == buffer.count {
                    guard buffer.count < largestTypedNote else {
                        throw CLIError.unavailable("more than \(largestTypedNote >> 20) MiB was typed", hint: "give it as a FILE instead")
                    }
                    let larger = SecureBytes(count: 2 * buffer.count)
                    buffer.withUnsafeBytes { old in larger.withUnsafeMutableBytes { $0.copyMemory(from: old) } }
                    buffer = larger
                }
                let count = buffer.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress! + length, $0.count - length) }
                if count < 0 && errno == EINTR { continue }
                guard count >= 0 else { throw VaultError.fileSystem(path: "standard input", reason: String(cString: strerror(errno))) }
                if count == 0 { break }
                length += count
            }
            return buffer.withUnsafeBytes { SecureBytes(copying: $0.prefix(length)) }
        }
    }

    /// Tells the person at the terminal, as a prompt does (nothing without one).
    static func tell(_ text: String) {
        guard let tty = TTY() else { return }
        ProgressLine.clearing { tty.write(text + "\n") }
    }
}

/// The controlling terminal, opened read-write.
private final class TTY {
    private let fd: Int32

    init?() {
        fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        if fd < 0 { return nil }
    }

    deinit { close(fd) }

    /// Drops input typed before the question was shown.
    func discardTypedAhead() { tcflush(fd, TCIFLUSH) }

    func write(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Foundation.write(fd, $0.baseAddress, $0.count) }
    }

    /// Reads one line; nil when `stillOpen` turns false first. The terminal is in canonical
    /// mode, so it reads as ready only once a whole line was typed (or at end of input).
    func readLine(while stillOpen: () -> Bool = { true }) -> String? {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while true {
            guard stillOpen() else { return nil }
            let ready = poll(&entry, 1, 200)
            if ready > 0 { break }
            if ready < 0 && errno != EINTR { break }
        }
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1, byte != 0x0A, bytes.count < 4096 { bytes.append(byte) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Reads one line with echo off into locked memory; restores the terminal even if the
    /// user interrupts.
    func readSecret(prompt: String) throws -> SecureBytes {
        var saved = termios()
        let canHideInput = tcgetattr(fd, &saved) == 0
        if canHideInput {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            quiet.c_lflag |= tcflag_t(ECHONL)
            TerminalRestore.arm(fd: fd, settings: saved)
            tcsetattr(fd, TCSAFLUSH, &quiet)
        }
        // Only now: whatever is typed after the prompt must not echo.
        write(prompt)
        defer {
            if canHideInput {
                tcsetattr(fd, TCSAFLUSH, &saved)
                TerminalRestore.disarm()
            }
        }
        let buffer = SecureBytes(count: PassphraseFile.maximumLength)
        var length = 0
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1, byte != 0x0A {
            guard length < buffer.count else { throw CLIError.invalidInput("the passphrase is too long") }
            buffer.withUnsafeMutableBytes { $0[length] = byte }
            length += 1
        }
        byte = 0
        if length > 0, buffer.withUnsafeBytes({ $0[length - 1] }) == 0x0D { length -= 1 }
        return buffer.withUnsafeBytes { SecureBytes(copying: $0.prefix(length)) }
    }
}

/// Puts the terminal's echo back if the user presses Ctrl-C at a hidden prompt.
///
/// Once the prompt is answered, the handlers it replaced are put back, not the defaults:
/// `vault serve` ignores SIGINT and SIGTERM and stops on them through dispatch sources, and
/// a default SIGINT after its passphrase prompt killed it without its goodbye and clean-up.
private enum TerminalRestore {
    nonisolated(unsafe) static var fd: Int32 = -1
    nonisolated(unsafe) static var settings = termios()
    static let signals = [SIGINT, SIGTERM, SIGHUP]
    nonisolated(unsafe) static var replaced: [sigaction] = Array(repeating: .init(), count: 3)

    static func arm(fd: Int32, settings: termios) {
        Self.fd = fd
        Self.settings = settings
        for (i, sig) in signals.enumerated() {
            var action = sigaction()
            // At the prompt itself the signal ends the process, as it would have: nothing
            // has started yet that needs stopping cleanly.
            action.__sigaction_handler.sa_handler = { received in
                if TerminalRestore.fd >= 0 { tcsetattr(TerminalRestore.fd, TCSAFLUSH, &TerminalRestore.settings) }
                signal(received, SIG_DFL)
                raise(received)
            }
            sigemptyset(&action.sa_mask)
            sigaction(sig, &action, &replaced[i])
        }
    }

    static func disarm() {
        fd = -1
        for (i, sig) in signals.enumerated() { sigaction(sig, &replaced[i], nil) }
    }
}
