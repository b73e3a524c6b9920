import HTTPTypes
import Hummingbird
import NIOCore

/// The page that opens a share link in a browser, and its script and style: files of this
/// project (Sources/VaultRelay/Links/Assets), built into the binary, so the relay serves
/// them without a CDN or any third party.
///
/// Every answer forbids everything the page does not need: scripts and styles from this
/// relay only, fetches to this relay only, no frames, no forms, no referrer (the fragment
/// is never in a Referer anyway; the id need not be either), no caching.
enum LinkPage {
    static let page = response(PackageResources.link_html, type: "text/html; charset=utf-8")
    static let script = response(PackageResources.link_js, type: "text/javascript; charset=utf-8")
    static let style = response(PackageResources.link_css, type: "text/css; charset=utf-8")

    static let contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        + "img-src 'self' data: blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    private static func response(_ bytes: [UInt8], type: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.cacheControl] = "no-store"
        headers[.contentSecurityPolicy] = contentSecurityPolicy
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Cross-Origin-Opener-Policy")!] = "same-origin"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
