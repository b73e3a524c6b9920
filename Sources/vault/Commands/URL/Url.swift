import ArgumentParser
import Foundation
import VaultCore
import VaultNet

struct Url: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "url",
        abstract: "Handle a vault://x-callback-url/encrypt or decrypt request from another program.",
        discussion: """
            The result goes to the request's x-success URL (errors to x-error, a refusal to \
            x-cancel), printed on standard output, or opened with xdg-open (--open). Every \
            request is shown, with where its results go, and must be confirmed on the terminal; \
            without one, only requests whose results go to an allowed destination ('vault \
            settings url-allow DESTINATION') are served, and never with a locked key. A decrypt \
            sends its plaintext to a web origin only when that origin is allowed. Give the URL as - to read it from standard input, which keeps data out of the \
            process list. Docs/URL.md has the parameters and error codes.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The request, or - to read it from standard input.", valueName: "url"))
    var url: String?

    @Flag(help: "Open the callback URL with xdg-open instead of printing it.")
    var open = false

    @Flag(help: "Register vault as the desktop's handler of vault:// URLs.")
    var installHandler = false

    @Flag(help: "Remove the desktop handler.")
    var uninstallHandler = false

    // For scripts/install and scripts/package: the system-wide handler is this text, with
    // the installed path, rather than a second copy of it kept in sync by hand.
    @Option(help: ArgumentHelp("Print the desktop entry that runs the vault binary at this path, for installers.",
                               valueName: "path", visibility: .hidden))
    var printHandler: String?

    @OptionGroup var recovery: KeyRecoveryOptions

    func validate() throws {
        let modes = [url != nil, installHandler, uninstallHandler, printHandler != nil].filter { $0 }.count
        guard modes == 1 else { throw ValidationError("give a URL, --install-handler or --uninstall-handler") }
        if let printHandler, !printHandler.hasPrefix("/") { throw ValidationError("--print-handler takes an absolute path") }
    }

    func run() async throws {
        if let printHandler { return print(DesktopHandler.entry(running: printHandler), terminator: "") }
        if installHandler { return try DesktopHandler.install() }
        if uninstallHandler { return try DesktopHandler.uninstall() }
        let text = try url == "-" ? readRequest() : url!
        // An encrypt's plaintext is in the request: out of the process list while it waits.
        if url != "-" { ArgumentHiding.hide(text) }
        let request: CallbackRequest
        do {
            request = try CallbackRequest(parsing: text)
        } catch {
            // Nothing in a URL that does not parse can be trusted, its callbacks included.
            throw CLIError.invalidInput(error.description)
        }
        let keystore = try home.openKeystore()
        let host = URLTerminalHost(keystore: keystore, access: await KeyAccess.open(keystore), keys: keys, recovery: recovery)
        let outcome = await URLRequestHandler(request: request, keystore: keystore, host: host).handle()
        try deliver(outcome, for: request, keystore: keystore)
    }

    private func readRequest() throws -> String {
        var input = FileSource(standardInput: ())
        let bytes = try input.readFully(CallbackRequest.maximumLength + 1)
        guard bytes.count <= CallbackRequest.maximumLength else { throw CLIError.invalidInput("the request is too long") }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw CLIError.invalidInput("the request is not UTF-8") }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Sends the outcome to its callback (printed, or opened), then reports it as the exit
    /// status: 0 success, 1 failure, 2 declined.
    private func deliver(_ outcome: URLOutcome, for request: CallbackRequest, keystore: Keystore) throws {
        switch outcome {
        case .success(let results):
            if let success = request["x-success"] {
                try send(CallbackURL.appending(results, to: success), carriesPlaintext: request.action == "decrypt")
            } else {
                print(results.map { "\(CallbackURL.encode($0.0))=\(CallbackURL.encode($0.1))" }.joined(separator: "&"))
            }
        case .failure(let code, let message):
            if let error = request["x-error"] {
                try sendFailure(CallbackURL.appending([("errorCode", String(code.rawValue)), ("errorMessage", message)], to: error),
                                named: "x-error", keystore: keystore)
            }
            throw CLIError.invalidInput("\(message) (error code \(code.rawValue))")
        case .cancelled:
            if let cancel = request["x-cancel"] {
                try sendFailure(cancel, named: "x-cancel", keystore: keystore)
            } else if let error = request["x-error"] {
                let code = URLErrorCode.declined
                try sendFailure(CallbackURL.appending([("errorCode", String(code.rawValue)), ("errorMessage", code.message)], to: error),
                                named: "x-error", keystore: keystore)
            }
            throw CLIError.cancelled
        }
    }

    /// Sends an x-error or x-cancel callback. With --open, it is opened only where x-success
    /// could send results: a scheme vault accepts as a destination, and a server only when its
    /// origin is on the allowlist. Nobody confirms a failure, so otherwise any web page could
    /// have vault open a `file:` URL or another program's scheme, or learn at a server of its
    /// choosing which key names exist (from "unknown key"). Such a callback is printed instead.
    private func sendFailure(_ callback: String, named field: String, keystore: Keystore) throws {
        if open {
            let destination = CallbackDestination(callback: callback)
            let allowed = try destination.map { try !$0.isNetwork || keystore.isURLDestinationAllowed($0) } ?? false
            guard allowed else {
                let why = destination.map { "\($0) is not on the allowlist" } ?? "it is not a destination vault sends to"
                Terminal.standardError("vault: warning: not opening the \(field) callback: \(why); it follows on standard output")
                return print(callback)
            }
        }
        try send(callback)
    }

    /// Prints the callback, or with --open hands it to xdg-open. A plaintext is never put on
    /// a command line that other users can read in /proc: it is printed instead.
    private func send(_ callback: String, carriesPlaintext: Bool = false) throws {
        guard open else { return print(callback) }
        if carriesPlaintext && !DesktopHandler.commandLinesHidden {
            Terminal.standardError("vault: warning: not opening the callback: the plaintext would sit on xdg-open's command line, "
                + "which other users can read in /proc; it follows on standard output")
            Terminal.standardError("vault: hint: mount /proc with hidepid=invisible, or have the program run 'vault url -' and read standard output")
            return print(callback)
        }
        if let problem = DesktopHandler.open(callback) {
            Terminal.standardError("vault: warning: cannot open the callback (\(problem)); it follows on standard output")
            print(callback)
        }
    }
}
