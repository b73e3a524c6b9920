import CCairo
import Foundation

/// A recovery kit as a PDF, drawn with cairo: A4 pages with the kit's facts, its QR codes
/// (7 cm wide, two a row, modules as vector squares, no anti-aliasing), its words numbered
/// in columns, and its instructions. Text is cairo's, in DejaVu Sans, so pdftotext and a
/// screen reader read it back.
public enum KitPage {
    static let width = 595.28, height = 841.89, margin = 48.0
    /// A code's side with its quiet zone: 7 cm.
    static let codeSide = 7 / 2.54 * 72

    /// Writes the kit to `output` (not committed: the caller commits once it is whole).
    public static func write(_ content: KitContent, to output: OutputFile) throws {
        let codes = try content.share.map { try KitCodes.texts(for: $0).map { try QRCode(text: $0) } } ?? []
        let sink = Sink(output)
        let context = Unmanaged.passRetained(sink)
        defer { context.release() }
        guard let surface = cairo_pdf_surface_create_for_stream(Sink.write, context.toOpaque(), width, height) else {
            throw VaultError.unexpected("cairo cannot make a PDF surface")
        }
        cairo_pdf_surface_set_metadata(surface, CAIRO_PDF_METADATA_TITLE, "vault recovery kit \(content.id) for \(content.holderName)")
        cairo_pdf_surface_set_metadata(surface, CAIRO_PDF_METADATA_CREATOR, "vault")
        guard let cr = cairo_create(surface) else { throw VaultError.unexpected("cairo cannot draw") }
        let pen = Pen(cr)
        pen.page(content)
        draw(codes, content: content, pen: pen)
        if !content.words.isEmpty { draw(words: content, pen: pen) }
        pen.instructions(content)
        cairo_show_page(cr)
        cairo_destroy(cr)
        cairo_surface_finish(surface)
        let status = cairo_surface_status(surface)
        cairo_surface_destroy(surface)
        if let failure = sink.failure { throw failure }
        guard status == CAIRO_STATUS_SUCCESS else { throw VaultError.unexpected("cairo failed: \(String(cString: cairo_status_to_string(status)))") }
    }

    private static func draw(_ codes: [QRCode], content: KitContent, pen: Pen) {
        guard !codes.isEmpty else { return }
        pen.heading(codes.count == 1 ? "This holder's share, as a QR code" : "This holder's share, as \(codes.count) QR codes (all are needed, in any order)")
        for (number, code) in codes.enumerated() {
            let column = number % 2
            if column == 0 { pen.need(codeSide + 30) }
            let x = margin + Double(column) * (codeSide + 40)
            pen.code(code, x: x, y: pen.y)
            pen.caption("code \(number + 1) of \(codes.count) · holder \(content.header.holderIndex) · \(content.id)", x: x, y: pen.y + codeSide + 12)
            if column == 1 || number == codes.count - 1 { pen.y += codeSide + 30 }
        }
    }

    private static func draw(words content: KitContent, pen: Pen) {
        let lists = content.words
        pen.heading(lists.count == 1 ? "This holder's share, as SLIP-39 words" : "This holder's share, as \(lists.count) SLIP-39 word lists (any \(content.wordsGroupThreshold) of them)")
        for (number, mnemonic) in lists.enumerated() {
            let rows = (mnemonic.count + 2) / 3
            // A list and its title stay on one page.
            pen.need(Double(rows) * 15 + 30)
            if lists.count > 1 { pen.line("Word list \(number + 1) of \(lists.count)", bold: true) }
            for row in 0..<rows {
                for column in 0..<3 {
                    let position = column * rows + row
                    guard position < mnemonic.count else { continue }
                    pen.word(position + 1, mnemonic.word(at: position), x: margin + Double(column) * 165, y: pen.y + Double(row) * 15)
                }
            }
            pen.y += Double(rows) * 15 + 10
        }
    }

    /// The PDF's bytes go to the output file as cairo makes them.
    private final class Sink {
        let output: OutputFile
        var failure: Error?

        init(_ output: OutputFile) { self.output = output }

        static let write: cairo_write_func_t = { closure, data, length in
            let sink = Unmanaged<Sink>.fromOpaque(closure!).takeUnretainedValue()
            do {
                try sink.output.write(UnsafeRawBufferPointer(start: data, count: Int(length)))
                return CAIRO_STATUS_SUCCESS
            } catch {
                sink.failure = error
                return CAIRO_STATUS_WRITE_ERROR
            }
        }
    }

    /// Where the next line goes, and the pages.
    private final class Pen {
        let cr: OpaquePointer
        var y = margin
        var pageNumber = 1
        var footer = ""

        init(_ cr: OpaquePointer) { self.cr = cr }

        func font(_ size: Double, bold: Bool = false, mono: Bool = false) {
            cairo_select_font_face(cr, mono ? "DejaVu Sans Mono" : "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                                   bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL)
            cairo_set_font_size(cr, size)
        }

        func widthOf(_ text: String) -> Double {
            var extents = cairo_text_extents_t()
            cairo_text_extents(cr, text, &extents)
            return extents.x_advance
        }

        func show(_ text: String, x: Double, y: Double) {
            cairo_move_to(cr, x, y)
            cairo_show_text(cr, text)
        }

        /// A new page when less than `space` is left.
        func need(_ space: Double) {
            guard y + space > height - margin - 20 else { return }
            font(8)
            cairo_set_source_rgb(cr, 0.35, 0.35, 0.35)
            show(footer + " · page \(pageNumber)", x: margin, y: height - margin / 2)
            cairo_set_source_rgb(cr, 0, 0, 0)
            cairo_show_page(cr)
            pageNumber += 1
            y = margin
        }

        func page(_ content: KitContent) {
            footer = "vault recovery kit · secret \(content.id) · holder \(content.header.holderIndex) of \(content.header.count), \(content.holderName)"
            font(20, bold: true)
            y += 10
            show("Recovery kit", x: margin, y: y)
            y += 26
            font(11)
            for (label, value) in content.facts {
                font(10, bold: true)
                show(label, x: margin, y: y)
                font(10)
                wrap(value, x: margin + 70, width: width - 2 * margin - 70, size: 10)
            }
            y += 6
            if content.share == nil {
                line("This secret is too large for paper: this kit carries no share. See \"This secret is too large for paper\" below.", bold: true)
            }
        }

        func heading(_ text: String) {
            need(60)
            y += 12
            font(13, bold: true)
            show(text, x: margin, y: y)
            y += 20
        }

        func line(_ text: String, bold: Bool = false) {
            need(16)
            font(10, bold: bold)
            wrap(text, x: margin, width: width - 2 * margin, size: 10)
        }

        /// Wraps `text` at word boundaries from (x, y), moving y down.
        func wrap(_ text: String, x: Double, width: Double, size: Double) {
            var current = ""
            for word in text.split(separator: " ") {
                let candidate = current.isEmpty ? String(word) : current + " " + word
                if widthOf(candidate) > width, !current.isEmpty {
                    need(size + 4)
                    show(current, x: x, y: y)
                    y += size + 4
                    current = String(word)
                } else {
                    current = candidate
                }
            }
            if !current.isEmpty {
                need(size + 4)
                show(current, x: x, y: y)
                y += size + 4
            }
        }

        func code(_ code: QRCode, x: Double, y top: Double) {
            let modules = Double(code.size + 2 * Limits.qrQuietZone)
            let unit = codeSide / modules
            cairo_save(cr)
            cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE)
            cairo_set_source_rgb(cr, 0, 0, 0)
            for row in 0..<code.size {
                var column = 0
                while column < code.size {
                    guard code.isDark(x: column, y: row) else { column += 1; continue }
                    let start = column
                    while column < code.size && code.isDark(x: column, y: row) { column += 1 }
                    cairo_rectangle(cr, x + (Double(start + Limits.qrQuietZone)) * unit, top + Double(row + Limits.qrQuietZone) * unit,
                                    Double(column - start) * unit, unit)
                }
            }
            cairo_fill(cr)
            cairo_restore(cr)
        }

        func caption(_ text: String, x: Double, y: Double) {
            font(8)
            show(text, x: x + 10, y: y)
        }

        func word(_ number: Int, _ word: String, x: Double, y: Double) {
            font(11, mono: true)
            show(String(repeating: " ", count: number < 10 ? 1 : 0) + "\(number)", x: x, y: y)
            font(12, bold: true, mono: true)
            show(word, x: x + 24, y: y)
        }

        func instructions(_ content: KitContent) {
            for (heading, paragraphs) in content.instructions {
                self.heading(heading)
                for paragraph in paragraphs {
                    if paragraph.hasPrefix("$ ") {
                        need(16)
                        font(10, mono: true)
                        show(paragraph, x: margin + 14, y: y)
                        y += 15
                    } else {
                        font(10)
                        wrap(paragraph, x: margin, width: width - 2 * margin, size: 10)
                        y += 3
                    }
                }
            }
            font(8)
            cairo_set_source_rgb(cr, 0.35, 0.35, 0.35)
            show(footer + " · page \(pageNumber)", x: margin, y: height - margin / 2)
            cairo_set_source_rgb(cr, 0, 0, 0)
        }
    }
}
