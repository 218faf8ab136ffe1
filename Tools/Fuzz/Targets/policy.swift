// Fuzz target `policy`: a policy document as `--policy FILE` reads it (Policy.decode, and
// JSONParser under it). A document may be refused with violations; it must never trap. One that
// is accepted must hash, and its canonical JSON must decode back to the same policy.
@_spi(Storage) import LedgerCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPolicy(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    switch Policy.decode(fuzzInput(data, size)) {
    case .failure(let violations):
        _ = violations.violations.map { "\($0.field): \($0.message)" }
    case .success(let policy):
        _ = policy.hash
        switch Policy.decode(policy.json) {
        case .failure(let violations):
            finding("an accepted policy's canonical JSON is refused: \(violations.violations.map(\.message))")
        case .success(let again):
            guard again == policy else { finding("an accepted policy's canonical JSON decodes as another policy") }
        }
    }
    return 0
}
