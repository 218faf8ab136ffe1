// Fuzz target `record`: a stored event record as the log reads it back (EventRecord.decode,
// decodeForFolding, indexed and the in-place accessors), then its payload as the read models
// and `ledger export` decode it. A damaged record must throw `corruptRecord` (or
// `unsupportedFormat`); it must never trap or read past its bytes (AddressSanitizer watches).
//
// Seeds: run with LEDGER_FUZZ_RECORD_SEEDS=DIR and JSONL files as arguments, this binary
// writes each valid line of those files to DIR as a record (what Tools/fuzz does first).
import Foundation
@_spi(Storage) import LedgerCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRecord(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    // libFuzzer's copy of the input is exactly `size` bytes: reads past it are caught.
    let raw = UnsafeRawBufferPointer(start: size > 0 ? data : nil, count: size)
    _ = EventRecord.id(ofRecord: raw)
    _ = EventRecord.recordedAt(ofRecord: raw)
    _ = EventRecord.content(ofRecord: raw)
    _ = EventRecord.hash(ofRecord: raw)
    _ = EventRecord.hashedBytes(ofRecord: raw)
    _ = try? EventRecord.indexed(raw, position: 1)
    _ = try? EventRecord.decodeForFolding(raw, position: 1, types: allTypes)
    if let stored = try? EventRecord.decode(raw, position: 1) {
        _ = try? RecordedEvent(stored)
        _ = try? EventLine.export(stored)
        _ = try? stored.draft.validate()
    }
    return 0
}

/// Every type the catalog knows, and one it does not, so the fold decodes every record.
private let allTypes = EventRecord.TypeFilter(Set(EventCatalog.known.map(\.name) + ["fuzz.unknown"]))

@_cdecl("LLVMFuzzerInitialize")
public func fuzzRecordInitialize(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>) -> CInt {
    guard let directory = ProcessInfo.processInfo.environment["LEDGER_FUZZ_RECORD_SEEDS"] else { return 0 }
    var written = 0
    for path in CommandLine.arguments.dropFirst() {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            fputs("record seeds: cannot read \(path)\n", stderr)
            exit(1)
        }
        for (number, line) in text.split(separator: "\n").enumerated() {
            guard case .success(let envelope) = EnvelopeDecoder.decode(Array(line.utf8), file: path, line: number + 1) else { continue }
            var record = EventRecord.encode(envelope.draft, version: UInt64(number + 1), recordedAt: envelope.recordedAt ?? envelope.occurredAt)
            record += [UInt8](repeating: UInt8(truncatingIfNeeded: number), count: EventRecord.hashSize)
            let name = "\(directory)/\(URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent)-\(number + 1).rec"
            guard FileManager.default.createFile(atPath: name, contents: Data(record)) else {
                fputs("record seeds: cannot write \(name)\n", stderr)
                exit(1)
            }
            written += 1
        }
    }
    print("record seeds: \(written) written to \(directory)")
    exit(0)
}
