import VaultCore

/// A fuzz target's failure of a property (as opposed to a refused input, which is fine):
/// crashes the process, so libFuzzer saves the input.
public func fuzzCheck(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
                      file: StaticString = #file, line: UInt = #line) {
    if !condition() { fatalError("property failed: \(message())", file: file, line: line) }
}

/// The fuzzer's input as bytes.
public func fuzzBytes(_ data: UnsafePointer<UInt8>, _ size: Int) -> [UInt8] {
    Array(UnsafeBufferPointer(start: data, count: size))
}
