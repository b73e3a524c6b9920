import ArgumentParser

/// `--yes`, for every command that asks a yes/no question before it acts. Each such
/// command's discussion says what it asks. Pairing takes no `--yes` (both people must
/// compare the code), and `vault serve` asks about each request as it comes.
struct ConfirmOption: ParsableArguments {
    @Flag(help: ArgumentHelp(
        "Answer yes to the command's question without asking (for scripts).",
        discussion: "Without a terminal and without --yes, the command refuses and changes nothing."))
    var yes = false

    /// Asks `question` on the terminal unless `--yes` answered it already; a "no" cancels.
    /// Without a terminal it refuses: a question nobody can answer never defaults to yes.
    func confirm(_ question: String, details: [String] = [], what: String) throws {
        guard !yes else { return }
        guard try Terminal.confirm(question, details: details, what: what) else { throw CLIError.cancelled }
    }
}
