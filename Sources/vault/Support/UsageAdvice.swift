import ArgumentParser
import Foundation

/// What to tell someone whose command line was refused: which command they meant to run,
/// and for a mistyped command or option the nearest ones that exist ("did you mean").
///
/// The names come from ArgumentParser's own description of the command tree (the JSON of
/// `--experimental-dump-help`), so a new command or option is known here without a list
/// to keep in step.
struct UsageAdvice {
    /// The command as far as the line names one: `["peer", "add"]`; empty for `vault` itself.
    private(set) var path: [String] = []
    /// A word or option the command does not have, with the nearest it does have.
    private(set) var unknown: (word: String, isOption: Bool, suggestions: [String])?

    init(arguments: [String]) {
        guard let root = Self.tree() else { return }
        var node = root
        var words = arguments[...]
        while let word = words.popFirst(), word != "--" {
            if word.hasPrefix("--") {
                let name = String(word.dropFirst(2).prefix { $0 != "=" })
                guard let option = node.option(named: name) else {
                    unknown = (word.prefix { $0 != "=" }.description, true,
                               Self.nearest(name, among: node.longNames).map { "--" + $0 })
                    return
                }
                // Its value is the next word, unless it came as --name=value.
                if option.kind == "option" && !word.contains("=") { _ = words.popFirst() }
            } else if word.hasPrefix("-") {
                continue
            } else if let subcommands = node.subcommands, !subcommands.isEmpty {
                if node.commandName == "vault" && word == "help" { return }
                guard let next = subcommands.first(where: { $0.commandName == word }) else {
                    let visible = subcommands.filter { $0.shouldDisplay != false }.map(\.commandName)
                    let nearest = Self.nearest(word, among: visible)
                    // Under a default subcommand the word may be that command's argument.
                    if node.defaultSubcommand == nil || !nearest.isEmpty { unknown = (word, false, nearest) }
                    return
                }
                path.append(word)
                node = next
            }
        }
    }

    /// `vault peer add`, the command as typed so far.
    var command: String { (["vault"] + path).joined(separator: " ") }

    /// The refusal and its hint, for a line ArgumentParser refused with `message`.
    func report(_ message: String) -> (String, String) {
        let help = path.isEmpty ? "'vault help' lists the commands" : "'vault help \(path.joined(separator: " "))' shows how to use it"
        guard let unknown else { return (message, help) }
        let what = unknown.isOption ? "option" : "command"
        let line = "'\(command)' has no \(what) '\(unknown.word)'"
        guard !unknown.suggestions.isEmpty else { return (line, help) }
        let named = unknown.suggestions.map { unknown.isOption ? "'\($0)'" : "'\(command) \($0)'" }
        return (line, "did you mean \(named.joined(separator: " or "))? " + help)
    }

    /// The names nearest `word`: at the smallest edit distance, if that is at most 1 for a
    /// word of up to 3 characters and 2 (or a third of the word) for a longer one; or else
    /// the names it begins.
    static func nearest(_ word: String, among names: [String]) -> [String] {
        let distances = names.map { ($0, editDistance(word, $0)) }
        let bound = word.count <= 3 ? 1 : max(2, word.count / 3)
        if let best = distances.map(\.1).min(), best <= bound {
            return distances.filter { $0.1 == best }.map(\.0)
        }
        return word.count >= 2 ? names.filter { $0.hasPrefix(word) } : []
    }

    /// Levenshtein distance, by characters.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        guard !a.isEmpty, !b.isEmpty else { return max(a.count, b.count) }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var row = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = row
        }
        return previous[b.count]
    }

    /// The part of ArgumentParser's tool description read here.
    private struct Command: Decodable {
        let commandName: String
        let shouldDisplay: Bool?
        let defaultSubcommand: String?
        let subcommands: [Command]?
        let arguments: [Argument]?

        struct Argument: Decodable {
            let kind: String
            let names: [Name]?
        }

        struct Name: Decodable {
            let kind: String
            let name: String
        }

        var longNames: [String] {
            (arguments ?? []).flatMap { $0.names ?? [] }.filter { $0.kind == "long" }.map(\.name)
        }

        func option(named name: String) -> Argument? {
            (arguments ?? []).first { $0.names?.contains { $0.kind == "long" && $0.name == name } ?? false }
        }
    }

    private struct Tool: Decodable {
        let command: Command
    }

    private static func tree() -> Command? {
        try? JSONDecoder().decode(Tool.self, from: Data(Vault._dumpHelp().utf8)).command
    }
}
