// Shared by every fuzz target (Tools/fuzz compiles it with each one).
#if canImport(Glibc)
import Glibc
#endif

/// The fuzzer's input as bytes (libFuzzer may pass no pointer for an empty input).
func fuzzInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    guard let data, size > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: size))
}

/// A broken invariant: says which, then aborts, which libFuzzer records as a crash with the
/// input that caused it. Thrown errors and failed decodes are not findings; only this is.
func finding(_ what: String) -> Never {
    fputs("FUZZ FINDING: \(what)\n", stderr)
    abort()
}
