import Foundation
import Testing
import VaultTestSupport

/// Issue 14, finding 5: text that others chose (a dealer's description, a file name) is
/// printed with control, bidi and zero-width characters escaped, so it cannot rewrite the
/// screen around it.
@Suite struct UntrustedTextTests {
    static func clean(_ text: String) -> Bool {
        !text.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\r" || $0 == "\u{202E}" || $0 == "\u{7}" }
    }

    @Test func aDealersDescriptionAndFileNameAreShownEscaped() throws {
        let circle = try Circle(["alice", "bob"])
        let hostile = "rent\u{1B}[2J\rYou owe nothing\u{202E}fdp.exe\u{7}"
        let file = circle.files.file("note\u{1B}[31m.txt")
        try "hello".write(toFile: file, atomically: true, encoding: .utf8)
        let id = try circle.share(from: "alice", [file, "--to", "bob", "-k", "2", "--description", hostile])
        let listed = try circle["bob"].ok("secrets", "list")
        let shown = try circle["bob"].ok("secrets", "show", id)
        #expect(Self.clean(listed) && Self.clean(shown), "\(listed.debugDescription)\n\(shown.debugDescription)")
        #expect(shown.contains("rent\\u{1B}[2J\\rYou owe nothing\\u{202E}fdp.exe\\u{07}"), "\(shown)")
        let piece = try circle.release(id, from: "alice", to: "bob")
        let recovered = try circle["bob"].vault.run(["recover", id, "--piece", piece, "-o", circle.files.file("out")])
        #expect(recovered.status == 0, "\(recovered.stderr)")
        #expect(Self.clean(recovered.stderr) && recovered.stderr.contains("file name: note\\u{1B}[31m.txt"), "\(recovered.stderr.debugDescription)")
    }
}
