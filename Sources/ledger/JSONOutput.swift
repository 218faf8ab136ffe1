@_spi(Storage) import LedgerCore
import LedgerModels

/// Shorthands for the command line's `--json` output, built on the ledger's own `JSON`: keys
/// stay in the order written, and a missing value is `null`, never omitted.
extension JSON {
    static func time(_ t: Timestamp?) -> JSON { t.map { .string($0.description) } ?? .null }
    static func uint(_ v: UInt64?) -> JSON { v.map { .integer(Int64(clamping: $0)) } ?? .null }
    static func int(_ v: Int) -> JSON { .integer(Int64(v)) }
    static func double(_ v: Double) -> JSON { JSONNumber(v).map(JSON.number) ?? .null }
    static func object(_ members: [(String, JSON)]) -> JSON { .object(JSONObject(members)) }

    /// Compact JSON on one line, as output: DEL and C1 controls as `\u00XX` escapes, like C0
    /// (`JSON.Escaping.output`), so that no control reaches a terminal. Every `--json` is this.
    var text: String { serialized(escaping: .output) }
}
