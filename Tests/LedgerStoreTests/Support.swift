import Foundation
import Glibc
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
import Testing

/// A small valid event (`usage.recorded`); `n` varies every field that matters. A `payload`
/// given replaces the encoded data as is.
func draft(_ subject: String, _ n: Int = 0, payload: [UInt8]? = nil) -> EventDraft {
    var usage = UsageRecorded()
    usage.feature = "feature \(n)"
    usage.count = Int64(n) + 1
    return EventDraft(subject: subject, type: UsageRecorded.type, schemaVersion: UsageRecorded.schemaVersion,
                      occurredAt: Timestamp(milliseconds: 1_772_357_400_000 + Int64(n)),
                      source: .app, meta: ["n": "\(n)"], payload: payload ?? EventCatalog.encode(usage.eventData))
}


/// Appends `drafts` to the log at `path` (created if new) and closes it.
func writeStore(_ path: String, _ drafts: [EventDraft]) throws {
    let log = try EventLog(path: path)
    try log.append(drafts)
    log.close()
}

/// Opening the store at `path` read only is refused, saying its layout must be upgraded first.
func expectReadOnlyOpenRefused(_ path: String, layout: Int) {
    var readOnly = EventLog.Options()
    readOnly.readOnly = true
    do throws(LedgerError) {
        _ = try EventLog(path: path, options: readOnly)
        Issue.record("a layout-\(layout) store opened read only")
    } catch {
        #expect(error.message.contains("has layout \(layout); open it once for writing"))
    }
}

/// Every (key, value) of one of the store's databases, in order; each value of a `.dupSort` key
/// as an entry of its own. The store must not be open in this process.
func entries(of name: String, flags: Database.Flags = [], at path: String) throws -> [(key: [UInt8], value: [UInt8])] {
    let env = try Environment(path: path)
    let db = try env.openDatabase(name, flags: flags)
    return try env.read { txn in
        try txn.withCursor(db) { cursor in
            var entries: [(key: [UInt8], value: [UInt8])] = []
            var entry = try cursor.first()
            while let e = entry {
                entries.append((Array(e.key), Array(e.value)))
                entry = try cursor.next()
            }
            return entries
        }
    }
}
