import Foundation
import Testing
@testable import VaultCore

/// Issue 32, L1: content from others reaches a terminal with its control characters
/// escaped, however the stream is cut into chunks.
@Suite struct TerminalTextStreamTests {
    static func escaped(_ chunks: [[UInt8]]) throws -> String {
        var out: [UInt8] = []
        let stream = TerminalTextStream { out += $0 }
        for chunk in chunks { try chunk.withUnsafeBytes(stream.write) }
        try stream.finish()
        return String(decoding: out, as: UTF8.self)
    }

    static func escaped(_ bytes: [UInt8]) throws -> String { try escaped([bytes]) }

    @Test func controlsBidiAndStrayBytesAreEscapedAndTextIsKept() throws {
        let text = "wifi: h\\nter2\tok\nclip\u{1B}]52;c;aGk=\u{07} \u{1B}[2J\u{9B}31m é 日本 👩‍👩‍👧 \u{202E}fdp\u{2066}\u{200B}\r\nend\rX\0"
        #expect(try Self.escaped(Array(text.utf8)) ==
            "wifi: h\\nter2\tok\nclip\\u{1B}]52;c;aGk=\\u{07} \\u{1B}[2J\\u{009B}31m é 日本 👩‍👩‍👧 \\u{202E}fdp\\u{2066}\u{200B}\r\nend\\rX\\0")
        // Not UTF-8: a lone continuation, an overlong form, a surrogate, a cut sequence at the end.
        #expect(try Self.escaped([0x41, 0x80, 0xC0, 0xAF, 0xED, 0xA0, 0x80, 0x42, 0xE6, 0x97]) ==
            "A\\x{80}\\x{C0}\\x{AF}\\x{ED}\\x{A0}\\x{80}B\\x{E6}\\x{97}")
        #expect(try Self.escaped(Array("a\r".utf8)) == "a\\r")
    }

    /// Every way of cutting the text in two, and one byte at a time, gives what the whole does.
    @Test func chunkBoundariesChangeNothing() throws {
        var bytes = Array("é\u{1B}[31m日\r\n\u{202E}👩‍👧\r\u{85}x".utf8)
        bytes += [0xF0, 0x9F, 0x41, 0xE6, 0x97]
        let whole = try Self.escaped(bytes)
        for cut in 0...bytes.count {
            #expect(try Self.escaped([Array(bytes[..<cut]), Array(bytes[cut...])]) == whole, "cut at \(cut)")
        }
        #expect(try Self.escaped(bytes.map { [$0] }) == whole)
    }

    /// Output larger than the stream's buffer comes out whole, and mostly escapes.
    @Test func longOutputIsFlushedWhole() throws {
        let bytes = [UInt8](repeating: 0x1B, count: 100_000) + Array("end".utf8)
        let out = try Self.escaped(bytes)
        #expect(out == String(repeating: "\\u{1B}", count: 100_000) + "end")
    }
}
