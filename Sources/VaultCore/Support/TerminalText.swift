/// Text from outside (a caller's `x-source`, a file name, a description, a title, a label
/// from a pairing peer) made safe to print on a terminal.
///
/// Raw, such text could carry escape sequences that move the cursor or recolour the
/// screen, a carriage return that overwrites a confirmation line, or bidi controls that
/// show characters in another order than they are stored. Each of those is shown escaped
/// instead (`\u{1B}`, `\r`, `\u{202E}`), so what a person reads is what the text holds.
public enum TerminalText {
    /// `text` with control, format (bidi, zero-width) and line or paragraph separator
    /// characters escaped, cut to `limit` characters (then ending in `…`).
    public static func escaped(_ text: String, limit: Int = 256) -> String {
        var out = ""
        var count = 0
        for scalar in text.unicodeScalars {
            if count == limit { return out + "…" }
            count += 1
            // A literal backslash too, or text could imitate an escaped character.
            if needsEscape(scalar) || scalar == "\\" {
                out += scalar.escaped(asASCII: true)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Whether a scalar could change how the rest of a line is shown.
    static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }
}
