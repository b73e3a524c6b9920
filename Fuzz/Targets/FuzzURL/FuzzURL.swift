import FuzzSupport
@testable import VaultCore

/// `vault://x-callback-url/` requests: parse; what a request's parameters encode to parses
/// back to the same parameters.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard let text = String(validating: fuzzBytes(data, size), as: UTF8.self),
          let request = try? CallbackRequest(parsing: text) else { return 0 }
    let rebuilt = CallbackURL.appending(request.parameters.map { ($0.name, $0.value) }, to: "vault://x-callback-url/\(request.action)")
    let again = try? CallbackRequest(parsing: rebuilt)
    fuzzCheck(again?.action == request.action && again?.parameters.map(\.name) == request.parameters.map(\.name)
              && again?.parameters.map(\.value) == request.parameters.map(\.value), "URL round trip")
    return 0
}
