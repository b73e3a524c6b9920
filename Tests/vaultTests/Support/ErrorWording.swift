import Foundation

/// What a Swift error looks like when it reaches the user as Swift describes it, rather than
/// in words: a case name (`trailingData`, `unexpectedTag`), a payload in parentheses
/// (`invalid(…)`, `Optional(…)`), quoted internal strings, a type or Foundation domain
/// (`IOError`, `NSCocoaErrorDomain`, `Error Domain=`), ArgumentParser's `Error:` fallback,
/// or a bare case after a colon (`keystore error: forged`).
enum ErrorWording {
    /// Words shaped like Swift names that are documented user text: the parameters of
    /// vault:// requests (Docs/URL.md), and binary units of sizes ("32 MiB").
    static let userText: Set<String> = ["encryptedData", "scryptN", "addPassword", "errorCode", "errorMessage", "KiB", "MiB", "GiB", "TiB"]

    /// Single words that may end an error line after a colon.
    static let lastWords: Set<String> = ["none"]

    /// Each artifact found in `stderr`, with its line. Absolute paths are left out first:
    /// the tests choose them (temporary directories have random mixed-case names).
    static func artifacts(in stderr: String, allowing allowed: Set<String> = []) -> [String] {
        stderr.split(separator: "\n").flatMap { line in
            artifacts(inLine: String(line), allowing: allowed.union(userText)).map { "\($0) in: \(line)" }
        }
    }

    /// The words of a command line: what the user typed is theirs to see again.
    static func words(of arguments: [String]) -> Set<String> {
        Set(arguments.flatMap { $0.split { !$0.isLetter && !$0.isNumber }.map(String.init) })
    }

    private static func artifacts(inLine line: String, allowing allowed: Set<String>) -> [String] {
        var text = line
        let isError = line.hasPrefix("vault: error: ")
        for prefix in ["vault: error: ", "vault: hint: ", "vault: warning: ", "vault serve: "] where text.hasPrefix(prefix) {
            text.removeFirst(prefix.count)
        }
        text = text.replacingOccurrences(of: #"(?<![\w.:/])/[^\s']*"#, with: "PATH", options: .regularExpression)
        var found: [String] = []
        let patterns = [
            #"\b[a-z]+[A-Z][A-Za-z]*\b"#,            // camelCase: an enum case or a property
            #"\b[A-Z][a-z]+[A-Z][A-Za-z]*\b"#,       // UpperCamelCase: a type
            #"\b[A-Za-z]*Error\b"#,                  // IOError, CocoaError, NetError
            #"[A-Za-z_]\("#,                         // case(payload), Optional(…), bind(descriptor:…)
        ]
        for pattern in patterns {
            for word in matches(pattern, in: text) where !allowed.contains(word.trimmingCharacters(in: ["("])) {
                found.append("'\(word)'")
            }
        }
        for marker in ["\"", "Domain=", "NSCocoa", "NSPOSIX", "errno", "Error:", "keystore error", "Swift.", "Foundation."]
        where text.contains(marker) {
            found.append("'\(marker)'")
        }
        // A bare word after a colon, or alone, is a case name printed as it is.
        if isError, let last = matches(#"(?:^|: )([a-z]+)$"#, in: text).first {
            let word = last.hasPrefix(": ") ? String(last.dropFirst(2)) : last
            if !lastWords.contains(word) && !allowed.contains(word) { found.append("bare word '\(word)'") }
        }
        return found
    }

    private static func matches(_ pattern: String, in text: String) -> [String] {
        let expression = try! NSRegularExpression(pattern: pattern)
        return expression.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
            Range($0.range, in: text).map { String(text[$0]) }
        }
    }
}
