// Fuzz target `line`: one JSONL input line as `ledger append` reads it (EnvelopeDecoder, and
// JSONParser under it). A line may be refused with problems; it must never trap. A line that
// is accepted must take the append path whole: its draft encodes as a record that decodes back
// to the same draft, and exporting that record gives a line that reads back as the same event.
@_spi(Storage) import LedgerCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLine(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = fuzzInput(data, size)
    switch EnvelopeDecoder.decode(bytes, file: "fuzz", line: 1) {
    case .failure(let problems):
        _ = problems.description
    case .success(let envelope):
        let draft = envelope.draft
        _ = try? draft.validate()
        var record = EventRecord.encode(draft, version: 1, recordedAt: envelope.recordedAt ?? envelope.occurredAt)
        record += [UInt8](repeating: 0, count: EventRecord.hashSize)
        let stored: StoredEvent
        do {
            stored = try record.withUnsafeBytes { raw throws(LedgerError) in try EventRecord.decode(raw, position: 1) }
        } catch {
            finding("an accepted line's record does not decode: \(error)")
        }
        guard stored.draft == draft else { finding("an accepted line's record decodes as another draft") }
        guard let line = try? EventLine.export(stored) else { finding("an accepted line's record does not export") }
        switch EnvelopeDecoder.decode(line, file: "export", line: 1) {
        case .failure(let problems):
            finding("an exported line is refused: \(problems)")
        case .success(let again):
            guard again.draft == draft else { finding("an exported line reads back as another event") }
        }
    }
    return 0
}
