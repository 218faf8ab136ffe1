import Foundation
import Glibc
import LedgerCore
import LedgerStore

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

