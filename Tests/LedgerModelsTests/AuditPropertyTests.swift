@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerTestSupport
import PropertyBased
import Testing

/// The audit's timeline agrees with the views: starting from the views before the first event
/// and applying each entry's changes gives, after every entry, every model's view of the events
/// up to it at its time. The audit works a view out again only when its state, the facts or a
/// change time moved; this holds it to views worked out afresh at every entry. (Fields a view
/// restates, which the audit does not list, are left out.)
@Suite struct AuditPropertyTests {
    static func restated<M: ReadModel>(_ model: M.Type) -> Set<String> { M.View.restatedFields }
    @Test func eachEntryLeavesTheViewsOfTheEventsUpToIt() async {
        await checkProperty(count: 25, input: Gen.uint64()) { seed in
            for (name, subject) in try RulePropertyTests.subjects(seed: seed, count: 3, perSubject: 2...24) {
                let events = subject.events.sorted { ($0.occurredAt, $0.position) < ($1.occurredAt, $1.position) }
                guard let first = events.first, let last = events.last else { continue }
                let end = last.occurredAt.adding(seconds: 400 * 86_400)
                let report = Audit.report(subject: name, events: events, at: end, knownAt: nil, policy: .reference)
                func views(_ prefix: ArraySlice<RecordedEvent>, at t: Timestamp) -> [String: FlatView] {
                    var out: [String: FlatView] = [:]
                    for (model, view) in Replay.views(of: name, from: Array(prefix), at: t, models: ReadModels.all, policy: .reference) {
                        out[model] = FlatView.flatten(view?.json ?? JSONObject())
                    }
                    return out
                }
                // Every event is an entry, each entry and each gap checked on every field.
                #expect(report.entries.count { $0.position != nil } == events.count, "seed \(seed), \(name)")
                var checked = 0
                var running = views([], at: first.occurredAt)
                var folded = 0
                for (index, entry) in report.entries.enumerated() {
                    if entry.position != nil { folded += 1 }
                    var current: [String: [String: JSON]] = [:]
                    for (model, view) in running { current[model] = Dictionary(view.pairs, uniquingKeysWith: { a, _ in a }) }
                    for change in entry.changes { current[change.model, default: [:]][change.field] = change.to }
                    let expected = views(events[..<folded], at: entry.occurredAt)
                    checked += Self.expect(current, toBe: expected, "seed \(seed), \(name), \(entry.type) at \(entry.occurredAt)")
                    running = expected
                    // Until the next entry nothing changes: halfway there, and a millisecond before.
                    let next = index + 1 < report.entries.count ? report.entries[index + 1].occurredAt : end.adding(milliseconds: 1)
                    let gap = next.milliseconds(since: entry.occurredAt)
                    guard gap > 1 else { continue }
                    for t in [entry.occurredAt.adding(milliseconds: gap / 2), next.adding(milliseconds: -1)] {
                        checked += Self.expect(current, toBe: views(events[..<folded], at: t),
                                               "seed \(seed), \(name), after \(entry.type) at \(entry.occurredAt), at \(t)")
                    }
                }
                #expect(checked >= 10 * report.entries.count, "seed \(seed), \(name): \(checked) fields checked over \(report.entries.count) entries")
            }
        }
    }

    /// Each model's fields in `expected` (those a view restates left out) have their value in
    /// `current`; how many fields were compared.
    @discardableResult
    static func expect(_ current: [String: [String: JSON]], toBe expected: [String: FlatView], _ comment: String) -> Int {
        var compared = 0
        for (model, view) in expected {
            let restated = ReadModels.all.first { $0.name == model }.map { Self.restated($0) } ?? []
            for (field, value) in view.pairs where !restated.contains(field) {
                #expect(current[model]?[field] ?? .null == value, "\(comment): \(model).\(field)")
                compared += 1
            }
        }
        return compared
    }

    /// A report read back from its JSON (as a cluster's client reads a node's) is the report.
    @Test func aReportReadsBackFromItsJSON() async {
        await checkProperty(count: 25, input: Gen.uint64()) { seed in
            for (name, subject) in try RulePropertyTests.subjects(seed: seed, count: 3, perSubject: 1...24) {
                guard let last = subject.events.map(\.occurredAt).max() else { continue }
                for knownAt in [nil, KnownAt.position(3), KnownAt.time(last)] {
                    let report = Audit.report(subject: name, events: subject.events, at: last.adding(seconds: -86_400), knownAt: knownAt, policy: .reference)
                    // Through its bytes, as a node sends it.
                    let sent = try JSONParser.parse(Array(report.json.serialized().utf8))
                    let read = AuditReport(json: sent, laterEvents: report.laterEvents, timeZone: report.timeZone)
                    #expect(read == report, "seed \(seed), \(name)")
                }
            }
        }
    }
}
