import Foundation

/// Takes an argument out of the process list: `/proc/PID/cmdline`, which every local user can
/// read, shows the process's own argument memory, and vault overwrites the argument there.
///
/// For secrets given as arguments after all: the desktop's vault:// handler (`vault url
/// --open %u`) gets the request, plaintext and all, as an argument, and a request waits at
/// its prompt for as long as its person takes; a link's key, or a relay invite, may be
/// pasted on the command line. The argument is visible from the process's start until this
/// runs (milliseconds), in the shell's history, and in the process that started vault; `-`
/// (standard input) keeps it out of all of them.
enum ArgumentHiding {
    /// Overwrites with zero bytes every argument of this process that equals `value`. The
    /// parsed command keeps its own copy (ArgumentParser read Swift's `CommandLine.arguments`,
    /// a copy, before any command runs).
    static func hide(_ value: String) {
        for index in 1..<Int(CommandLine.argc) {
            guard let argument = CommandLine.unsafeArgv[index], String(cString: argument) == value else { continue }
            memset(argument, 0, strlen(argument))
        }
    }
}
