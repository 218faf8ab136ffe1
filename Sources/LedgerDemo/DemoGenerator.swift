import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
import Synchronization

/// The demo's two passes over its customers: plan every history to learn the order the
/// events were recorded in, then append them in that order, window by window, planning each
/// history again when its events are due (plans are cheap; holding a million histories is not).
@_spi(Storage) public struct DemoGenerator: Sendable {
    public let subjects: Int
    public let seed: UInt64
    /// The demo's present, in milliseconds since 1970.
    public let now: Int64

    public init(subjects: Int, seed: UInt64, now: Int64) {
        self.subjects = subjects
        self.seed = seed
        self.now = now
    }

    /// One event's place: when it was recorded, whose it is and which step of their plan.
    public struct Key: Comparable, Sendable {
        public var recordedAt: Int64
        public var subject: UInt32
        public var step: UInt16

        public static func < (a: Key, b: Key) -> Bool {
            (a.recordedAt, a.subject, a.step) < (b.recordedAt, b.subject, b.step)
        }
    }

    /// A customer worth auditing, and why.
    public struct Telling: Sendable {
        public var index: Int
        public var why: String

        /// The customer's subject.
        public var subject: String { DemoHistory.subject(index) }
    }

    /// Every event of every customer in recorded order (ties by subject, then plan order).
    public func recordedOrder(progress: (Int) -> Void) -> [Key] {
        var keys: [Key] = []
        keys.reserveCapacity(subjects * 14)
        for index in 0..<subjects {
            let plan = DemoHistory.plan(subject: index, seed: seed, now: now)
            for (number, step) in plan.steps.enumerated() {
                keys.append(Key(recordedAt: step.recordedAt, subject: UInt32(index), step: UInt16(number)))
            }
            if index % 4096 == 0 { progress(index) }
        }
        keys.sort()
        return keys
    }

    /// The customers the demo audits: a refund recorded days late and then reversed, a failed
    /// payment that lapsed into the retention flow and bought a recovery pass, and a device
    /// that verified offline (then an upgrade, a deletion), the first customer of each kind.
    public func telling() -> [Telling] {
        let wanted: [(DemoHistory.Traits, String)] = [
            ([.lateRefund, .refundReversed], "a refund recorded days after it happened, then reversed"),
            ([.billingLapse, .recoveryPass], "a failed payment that lapsed into the retention flow, then a recovery pass"),
            ([.deviceOnly, .offline], "bought elsewhere; the device verified, then went offline"),
            ([.upgrade, .billingRecovered], "an upgrade to yearly and a failed renewal that recovered"),
            ([.deleted], "an account deleted while the store still knew its subscription"),
        ]
        var found: [Telling?] = Array(repeating: nil, count: wanted.count)
        for index in 0..<subjects where found.contains(where: { $0 == nil }) {
            let traits = DemoHistory.plan(subject: index, seed: seed, now: now).traits
            for (i, (needed, why)) in wanted.enumerated() where found[i] == nil && traits.isSuperset(of: needed) {
                found[i] = Telling(index: index, why: why)
                break
            }
        }
        return found.compactMap { $0 }
    }

    public struct Appended: Sendable {
        public var summary = StreamSummary()
        public var types: [String: Int] = [:]
    }

    /// Appends the events in `order` with their positions (1, 2, …) and recordedAt, as a restore
    /// does, one window per transaction. A second thread drafts the next window while this one
    /// is appended. A store this demo already built reports duplicates.
    /// - Throws: `LedgerError.idConflict` when the store holds other events.
    public func append(_ order: [Key], to log: EventLog, progress: (Int) -> Void) throws(LedgerError) -> Appended {
        // A window's transaction rewrites every page its customers' states and stream entries
        // live on, so a big store takes bigger windows (fewer rewrites per event): about 20 of
        // them, 50,000 to 500,000 events each.
        let window = min(500_000, max(50_000, order.count / 20))
        let windows = stride(from: 0, to: order.count, by: window).map { $0..<min(order.count, $0 + window) }
        let drafted = Drafted()
        Thread.detachNewThread {
            for (index, range) in windows.enumerated() {
                guard drafted.put(self.draft(order, range), at: index) else { return }   // the append stopped
            }
        }
        defer { drafted.stop() }
        var result = Appended()
        for (index, range) in windows.enumerated() {
            let events = drafted.take(index)
            for event in events { if let event { result.types[event.draft.type, default: 0] += 1 } }
            let batch = try log.appendStream(restoring: true) { () -> any StreamedEvents in WindowEvents(events: events) }
            result.summary = result.summary.merged(with: batch)
            progress(range.upperBound)
        }
        return result
    }

    /// The events of `range` of `order`, in order: each customer of the window is planned once
    /// (in subject order) and its due steps drafted. The drafts are encoded directly; the append
    /// checks each one as it does any other event.
    public func draft(_ order: [Key], _ range: Range<Int>) -> [StreamedEvent?] {
        let bySubject = range.sorted { (order[$0].subject, order[$0].step) < (order[$1].subject, order[$1].step) }
        var slots = [StreamedEvent?](repeating: nil, count: range.count)
        var planned: (index: UInt32, plan: DemoHistory.Plan)?
        for k in bySubject {
            let key = order[k]
            if planned?.index != key.subject {
                planned = (key.subject, DemoHistory.plan(subject: Int(key.subject), seed: seed, now: now))
            }
            guard let plan = planned?.plan else { continue }
            let event = DemoHistory.event(plan.steps[Int(key.step)], subject: Int(key.subject), number: Int(key.step), seed: seed, zone: plan.zone)
            let draft = EventDraft(id: event.id ?? EventID(high: 0, low: 0), subject: event.subject, type: event.type,
                                   schemaVersion: type(of: event.data.payload).schemaVersion, occurredAt: event.occurredAt,
                                   source: event.source, meta: event.meta, payload: EventCatalog.encode(event.data))
            slots[k - range.lowerBound] = StreamedEvent(draft: draft, position: UInt64(k + 1), recordedAt: Timestamp(milliseconds: key.recordedAt))
        }
        return slots
    }

    private struct WindowEvents: StreamedEvents {
        let events: [StreamedEvent?]
        var cursor = 0
        mutating func next() throws -> StreamedEvent? {
            while cursor < events.count {
                defer { cursor += 1 }
                if let event = events[cursor] { return event }
            }
            return nil
        }
    }
}

/// The windows the drafting thread has made and the appending thread has yet to take: at most
/// two ahead of the append.
private final class Drafted: Sendable {
    private let state: Mutex<(windows: [Int: [StreamedEvent?]], stopped: Bool)> = Mutex(([:], false))
    private let ready = DispatchSemaphore(value: 0)
    private let room = DispatchSemaphore(value: 2)

    /// Hands over window `index`; `false` once the append has stopped.
    func put(_ events: [StreamedEvent?], at index: Int) -> Bool {
        room.wait()
        let stopped = state.withLock { state in
            state.windows[index] = events
            return state.stopped
        }
        ready.signal()
        return !stopped
    }

    /// Window `index`, waiting for it.
    func take(_ index: Int) -> [StreamedEvent?] {
        while true {
            if let events = state.withLock({ $0.windows.removeValue(forKey: index) }) {
                room.signal()
                return events
            }
            ready.wait()
        }
    }

    /// The append is over: the drafting thread stops at its next window.
    func stop() {
        state.withLock { $0.stopped = true }
        room.signal()
        room.signal()
    }
}
