import Foundation

/// A word for a command line that a hint suggests, so that it can be pasted into a shell as
/// it is: bare when only safe characters make it up, else in double quotes (a label's
/// alphabet has none of the characters a shell expands there), else in single quotes.
enum ShellWord {
    static func quoted(_ word: String) -> String {
        let safe = !word.isEmpty && word.unicodeScalars.allSatisfy { scalar in
            scalar.properties.isAlphabetic || scalar.properties.numericType != nil || "._-@+/:=,".unicodeScalars.contains(scalar)
        }
        if safe { return word }
        if !word.contains(where: { "\"$`\\!".contains($0) }) { return "\"" + word + "\"" }
        return "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
