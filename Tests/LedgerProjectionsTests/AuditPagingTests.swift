import Foundation
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerProjections
@_spi(Storage) import LedgerTestSupport
import Testing

/// A long timeline read a page at a time (`limit`, and a page's `next` as the cursor): the
/// pages together are the whole audit, in order, as known when the first was read.
@Suite struct AuditPagingTests {
    let mar1 = ts("2026-03-01T09:30:00Z")

    /// A subject's history: a trial that runs out (a time entry), sign-ins and outs.
    func history() -> [LedgerEvent] {
        [Make.created("u", at: mar1), Make.purchase("u", at: mar1, txn: "t1", expires: days(7, after: mar1), trial: true)]
            + (1 ... 20).map { Make.signedIn("u", at: mar1.adding(hours: Int64($0) * 12 + 5), $0 % 2 == 0) }
    }

    /// `body` with a store holding `history()`.
    func withHistory(_ body: (Ledger) throws -> Void) throws {
        try withStorePath { path in
            let ledger = try Ledger(path: path, policy: .reference)
            defer { ledger.close() }
            try ledger.append(history())
            try body(ledger)
        }
    }

    @Test func thePagesTogetherAreTheWholeAudit() throws {
        try withHistory { ledger in
            let at = days(30, after: mar1)
            let whole = try ledger.audit(of: "u", at: at)
            #expect(whole.entries.count > 20)
            #expect(whole.entries.contains { $0.type == "time" })
            var pages: [AuditReport] = [try ledger.audit(of: "u", at: at, limit: 7)]
            while let next = pages.last?.next, pages.count < 100 {
                pages.append(try ledger.audit(of: "u", limit: 7, after: next))
            }
            #expect(pages.flatMap(\.entries) == whole.entries)
            #expect(pages.dropLast().allSatisfy { $0.entries.count == 7 })
            #expect(pages.last?.entries.isEmpty == false)
            #expect(pages.last?.next == nil)
            #expect(pages.dropLast().map { $0.next?.offset } == (1 ..< pages.count).map { $0 * 7 })
        }
    }

    /// Events appended between pages (even ones that happened earlier) move no entry of the
    /// later pages: the cursor holds the position the first page was read at.
    @Test func aCursorReadsAsKnownWhenTheFirstPageWasRead() throws {
        try withHistory { ledger in
            let at = days(30, after: mar1)
            let whole = try ledger.audit(of: "u", at: at)
            let first = try ledger.audit(of: "u", at: at, limit: 5)
            let next = try #require(first.next)
            #expect(next.knownAt == .position(22))
            #expect(next.at == at)
            try ledger.append([Make.signedIn("u", at: mar1.adding(hours: 1), false), Make.signedIn("u", at: mar1.adding(hours: 2), true)])
            let second = try ledger.audit(of: "u", limit: 5, after: next)
            #expect(second.entries == Array(whole.entries[5 ..< 10]))
            #expect(second.knownAt == .position(22))
            // Without the cursor, the new events are there.
            #expect(try ledger.audit(of: "u", at: at).entries.count == whole.entries.count + 2)
        }
    }

    /// A page's JSON is the audit's with `next`; an audit read whole has no `next`.
    @Test func aPagesJSONSaysWhereTheNextStarts() throws {
        try withHistory { ledger in
            let at = days(30, after: mar1)
            guard case .object(let page) = try ledger.audit(of: "u", at: at, limit: 3).json,
                  case .object(let whole) = try ledger.audit(of: "u", at: at).json else {
                Issue.record("an audit's JSON is an object")
                return
            }
            #expect(page.members.map(\.key) == ["subject", "at", "knownAt", "entries", "next"])
            #expect(page["next"] == .string("\(at.milliseconds).p22.3"))
            #expect(whole.members.map(\.key) == ["subject", "at", "knownAt", "entries"])
        }
    }

    /// Cursors read back what they write, and nothing else.
    @Test func aCursorIsReadBackAndNothingElse() {
        let cursors = [AuditCursor(at: mar1, knownAt: .position(22), offset: 200), AuditCursor(at: mar1, knownAt: .time(mar1), offset: 0)]
        for cursor in cursors { #expect(AuditCursor(parsing: cursor.description) == cursor) }
        #expect(AuditCursor(parsing: "1772357400000.p22.200")?.knownAt == .position(22))
        for bad in ["", "1.p2", "1.p2.3.4", "x.p2.3", "1.q2.3", "1.p-2.3", "1.p2.-3", "1.p.3", "99999999999999999.p2.3", "1.p2.9223372036854775807", "1.p2.1000000001"] {
            #expect(AuditCursor(parsing: bad) == nil, "\(bad)")
        }
    }
}
