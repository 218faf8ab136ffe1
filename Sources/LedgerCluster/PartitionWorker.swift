@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerStore
@_spi(Storage) import LedgerProjections
import Synchronization

/// One partition a node holds: a thread folding its messages from the stream into the node's
/// store, and the service answering its requests (appends, views).
///
/// The fold commits each batch with the partition's checkpoint (the last stream sequence it
/// folded) in one LMDB transaction, so a node killed at any moment resumes exactly where its
/// store says. Appends are checked against the store once it has folded every message of
/// their subjects, and published with the subject's last sequence expected: a node that lost
/// its lease without knowing it is refused by JetStream rather than writing around the new
/// holder.
final class PartitionWorker: @unchecked Sendable {
    let partition: Int
    private let node: ClusterNode
    /// Made by the fold thread when it starts (a replicated consumer takes a while to make;
    /// the node takes its other partitions meanwhile), and again when it is lost.
    private var consumer: PullConsumer?
    /// The partition's services, which the fold thread starts once it has folded all the
    /// stream held when it began (a node never answers for a partition it has not caught up
    /// with); `nil` once stopping.
    private let services = Mutex<[Service]?>([])
    /// Services stopped, answering what they were already given.
    private let draining = Mutex<[Service]>([])
    private var thread: JoinableThread?
    private let running = Atomic<Bool>(true)
    /// An append has waited a second for the fold: the fold loop checks its consumer.
    private let stalled = Atomic<Bool>(false)
    /// The last stream sequence folded into the store.
    private let folded: Atomic<UInt64>
    /// Each subject's last stream sequence, as far as this worker has seen it.
    private let lastSequences = Mutex<[String: UInt64]>([:])
    /// Appends of this partition run one at a time.
    private let appending = Mutex<Void>(())

    static func checkpointName(_ partition: Int) -> String { "cluster.partition.\(partition)" }

    init(partition: Int, node: ClusterNode) throws(LedgerError) {
        self.partition = partition
        self.node = node
        let checkpoint = try node.ledger.log.setting(Self.checkpointName(partition)).flatMap { ClusterWire.integer($0["sequence"]) } ?? 0
        folded = Atomic(UInt64(clamping: checkpoint))
        let thread = JoinableThread { [self] in foldLoop() }
        guard thread.isStarted else { throw LedgerError(.storage, "the system refused a thread to fold partition \(partition)") }
        self.thread = thread
    }

    /// Starts answering the partition's requests, unless it has or is stopping.
    private func startServices() throws(LedgerError) {
        try services.withLock { services throws(LedgerError) in
            guard var started = services, started.isEmpty else { return }
            for (what, handle) in [("append", handleAppend), ("read", handleRead)] as [(String, ([UInt8]) -> [UInt8])] {
                started.append(try Service(node.connection, subject: ClusterLayout.service(partition: partition, what), queue: "ledger", handler: handle))
            }
            services = started
        }
    }

    /// Stops answering and folding; returns once the fold thread has ended.
    func stop() {
        beginStopping()
        finishStopping()
    }

    /// Stops answering and tells the fold thread to end (after its current fetch, within a
    /// second): several partitions stop together when a node gives them back.
    func beginStopping() {
        let stopping = services.withLock { services in
            defer { services = nil }
            return services ?? []
        }
        stopping.forEach { $0.stop() }
        draining.withLock { $0 += stopping }
        running.store(false, ordering: .relaxed)
    }

    /// Waits for the requests already delivered to be answered and the fold thread to end.
    func finishStopping() {
        draining.withLock { services in
            services.forEach { $0.finish() }
            services = []
        }
        thread?.join()
        thread = nil
        consumer?.stop()
    }

    var foldedSequence: UInt64 { folded.load(ordering: .acquiring) }

    /// The partition's consumer for this node, made anew from `sequence`.
    private static func consumer(_ partition: Int, _ node: ClusterNode, from sequence: UInt64) throws(LedgerError) -> PullConsumer {
        let name = "ledger-p\(partition)-\(ClusterLayout.token(of: node.name))"
        return try PullConsumer(node.connection, stream: ClusterLayout.stream, filter: ClusterLayout.filter(partition: partition), name: name, startSequence: sequence)
    }

    // MARK: Folding

    private func foldLoop() {
        var failures = 0
        var idle = 0
        while running.load(ordering: .relaxed) {
            do throws(LedgerError) {
                // Every 10 s without messages, or as soon as an append waits in vain, check that
                // the consumer is still there: one kept on a server that died is gone with it.
                if stalled.exchange(false, ordering: .relaxed) || idle >= 10 {
                    idle = 0
                    if consumer?.exists() == false { failures = 3 }
                }
                if failures >= 3 || consumer == nil {
                    let renewed = consumer != nil
                    consumer?.stop()
                    consumer = nil
                    consumer = try Self.consumer(partition, node, from: foldedSequence + 1)
                    if renewed { node.log("partition \(partition): a new consumer from sequence \(foldedSequence + 1)") }
                }
                guard let consumer else { continue }
                let messages = try consumer.fetch(batch: 512, timeout: 1_000)
                failures = 0
                if messages.isEmpty {
                    idle += 1
                    // Nothing more to fetch: caught up with the stream, so answer for it.
                    try startServices()
                } else {
                    idle = 0
                    try fold(messages)
                }
            } catch {
                // The consumer's deliveries are not acknowledged, so a batch that failed to
                // fold, or a fetch that failed part-way, would be skipped by the next fetch:
                // a new consumer starts from the checkpoint instead.
                failures = 3
                node.log("partition \(partition): \(error.message)")
                pause(milliseconds: 200)
            }
        }
    }

    /// Folds fetched messages (those past the checkpoint) in one transaction; a message the
    /// store refuses (an event published around the ledger with a conflicting id, or not an
    /// event) is folded alone, skipped, and recorded in the partition's refusals.
    private func fold(_ messages: [NATSConnection.StoredMessage]) throws(LedgerError) {
        let fresh = messages.filter { $0.sequence > foldedSequence }
        guard let last = fresh.last else { return }
        var events: [StreamedEvent] = []
        var refused: [(UInt64, String)] = []
        for message in fresh {
            switch event(of: message) {
            case .event(let event): events.append(event)
            case .refused(let reason): refused.append((message.sequence, reason))
            }
        }
        do throws(LedgerError) {
            _ = try node.ledger.log.replicate(events, settings: settings(through: last.sequence, refused: refused))
        } catch {
            guard error.code == .idConflict || error.code == .invalidEvent else { throw error }
            // One at a time: each good event folds, each refused one is recorded.
            for event in events {
                do throws(LedgerError) {
                    _ = try node.ledger.log.replicate([event], settings: [:])
                } catch {
                    guard error.code == .idConflict || error.code == .invalidEvent else { throw error }
                    refused.append((event.origin ?? 0, error.message))
                }
            }
            _ = try node.ledger.log.replicate([], settings: settings(through: last.sequence, refused: refused))
        }
        lastSequences.withLock { sequences in
            for event in events { if let origin = event.origin { sequences[event.draft.subject] = origin } }
        }
        folded.store(last.sequence, ordering: .releasing)
    }

    private enum Folded {
        case event(StreamedEvent)
        case refused(String)
    }

    private func event(of message: NATSConnection.StoredMessage) -> Folded {
        guard let (_, subject) = node.layout.parse(natsSubject: message.subject) else {
            return .refused("the NATS subject \(message.subject) is not one of partition \(partition)'s")
        }
        let draft: EventDraft
        do throws(LedgerError) {
            draft = try EventDraft(jsonLine: String(decoding: message.data, as: UTF8.self))
        } catch {
            return .refused("not an event: \(error.message)")
        }
        guard draft.subject == subject else {
            return .refused("the event's subject \(draft.subject) is not its NATS subject's \(subject)")
        }
        var event = StreamedEvent(draft: draft, recordedAt: Timestamp(milliseconds: message.time / 1_000_000))
        event.origin = message.sequence
        return .event(event)
    }

    private func settings(through sequence: UInt64, refused: [(UInt64, String)]) throws(LedgerError) -> [String: JSONObject] {
        var settings: [String: JSONObject] = [Self.checkpointName(partition): ["sequence": .integer(Int64(clamping: sequence))]]
        if !refused.isEmpty {
            let name = "cluster.refused.\(partition)"
            var list: [JSON] = []
            if case .array(let earlier)? = try node.ledger.log.setting(name)?["messages"] { list = earlier }
            list += refused.map { .object(["sequence": .integer(Int64(clamping: $0.0)), "reason": .string($0.1)]) }
            settings[name] = ["messages": .array(list.suffix(1_000))]
            for (sequence, reason) in refused { node.log("partition \(partition): message \(sequence) refused: \(reason)") }
        }
        return settings
    }

    /// Waits until the fold has passed `sequence`; `false` after `milliseconds`. A wait of a
    /// second has the fold loop check its consumer.
    private func waitForFold(_ sequence: UInt64, milliseconds: Int = 8_000) -> Bool {
        var waited = 0
        while foldedSequence < sequence {
            guard waited < milliseconds, running.load(ordering: .relaxed) else { return false }
            pause(milliseconds: 1)
            waited += 1
            if waited % 1_000 == 0 { stalled.store(true, ordering: .relaxed) }
        }
        return true
    }

    // MARK: Appends

    private func handleAppend(_ request: [UInt8]) -> [UInt8] {
        do throws(LedgerError) {
            let object = try ClusterWire.object(request, what: "append request")
            guard case .array(let lines)? = object["lines"] else { throw LedgerError(.invalidArgument, "an append request needs lines") }
            var drafts: [EventDraft] = []
            for (i, line) in lines.enumerated() {
                guard case .string(let text) = line else { throw LedgerError(.invalidEvent, "not an event line", index: i, field: "/") }
                do throws(LedgerError) {
                    drafts.append(try EventDraft(jsonLine: text))
                } catch {
                    var error = error
                    error.index = i
                    throw error
                }
                guard node.layout.partition(of: drafts[i].subject) == partition else {
                    throw LedgerError(.invalidArgument, "subject \(drafts[i].subject) is not in partition \(partition)", index: i, field: "/subject")
                }
            }
            var expecting: [String: ExpectedVersion] = [:]
            if case .object(let expectations)? = object["expecting"] {
                for member in expectations.members {
                    guard let expected = ClusterWire.expectedVersion(member.value) else {
                        throw LedgerError(.invalidArgument, "the expected version of \(member.key) is not any, noStream or a number")
                    }
                    expecting[member.key] = expected
                }
            }
            let call = ClusterWire.string(object["call"])
            if let call, call.isEmpty || call.utf8.count > 32 || !call.utf8.allBytes(\.isBase64URL) {
                throw LedgerError(.invalidArgument, "an append's call is 1…32 characters of A-Z, a-z, 0-9, '-', '_'", field: "/call")
            }
            let retry = object["retry"] == .bool(true)
            let outcomes = try appending.withLock { _ throws(LedgerError) in try append(drafts, expecting: expecting, call: call, retry: retry) }
            return ClusterWire.ok(.object(["outcomes": .array(outcomes.map(ClusterWire.json(of:)))]))
        } catch {
            if error.code == .unavailable || error.code == .storage { node.log("partition \(partition): an append failed: \(error.message)") }
            return ClusterWire.failure(error)
        }
    }

    /// Checks a batch against the store, publishes its new events and waits until the store
    /// has folded them (so that a read after the append sees it).
    ///
    /// `call` names the client's append call, the same in each of its tries, and goes with
    /// every event published: in a `retry`, an event an earlier try of the same call stored is
    /// `.appended`, not a duplicate.
    private func append(_ drafts: [EventDraft], expecting: [String: ExpectedVersion], call: String?, retry: Bool) throws(LedgerError) -> [AppendOutcome] {
        let mine = retry ? call : nil
        for (i, draft) in drafts.enumerated() {
            do throws(LedgerError) { _ = try draft.validate() } catch {
                var error = error
                error.index = i
                throw error
            }
        }
        // 1. Fold everything the stream holds of these subjects.
        let subjects = Set(drafts.map(\.subject)).union(expecting.keys)
        var expected: [String: UInt64] = [:]
        for subject in subjects.sorted() { expected[subject] = try catchUp(subject) }
        // 2. Ids and versions, as a single store checks them.
        var outcomes = [AppendOutcome?](repeating: nil, count: drafts.count)
        var firstOf: [EventID: Int] = [:]
        var fresh: [Int] = []
        for (i, draft) in drafts.enumerated() {
            let line = try EventLine.line(of: draft)
            if let first = firstOf[draft.id] {
                guard try EventLine.line(of: drafts[first]) == line else {
                    throw LedgerError(.idConflict, "event id \(draft.id) is twice in this batch with other content; an id names one fact, so give a new fact a new id",
                                      index: i, field: "/id", subject: draft.subject)
                }
                continue
            }
            firstOf[draft.id] = i
            // As a single store decides it: a personal field erased since counts as the same.
            if let stored = try node.ledger.log.stored(as: draft) {
                let origin = try node.ledger.log.origin(of: stored.position)
                let position = origin ?? stored.position
                guard stored.same else { throw LedgerError.idConflict(draft.id, storedAt: position, index: i, subject: draft.subject) }
                // An event with no origin in the stream was not published by any call.
                let message = mine == nil || origin == nil ? nil : try node.connection.message(in: ClusterLayout.stream, at: position)
                outcomes[i] = try outcome(ofStored: stored.position, at: position, published: message, mine: mine)
            } else {
                fresh.append(i)
            }
        }
        var versions: [String: UInt64] = [:]
        let freshSubjects = Set(fresh.map { drafts[$0].subject })
        let batchSubjects = Set(drafts.map(\.subject))
        for (subject, expectation) in expecting.sorted(by: { $0.key < $1.key }) {
            if batchSubjects.contains(subject) && !freshSubjects.contains(subject) { continue }
            let actual = try node.ledger.version(of: subject)
            guard expectation.isSatisfied(by: actual) else {
                throw LedgerError.wrongExpectedVersion(subject: subject, expected: expectation, actual: actual)
            }
        }
        // 3. Publish in waves: the first new event of every subject together, then the second…
        //    Each expects its subject's last sequence, known from the wave before: a subject
        //    another node wrote meanwhile refuses it, and nothing after it in its subject goes.
        var waves: [[Int]] = []
        var depth: [String: Int] = [:]
        for i in fresh {
            let d = depth[drafts[i].subject, default: 0]
            depth[drafts[i].subject] = d + 1
            if waves.count == d { waves.append([]) }
            waves[d].append(i)
        }
        var last: UInt64 = 0
        for wave in waves {
            var publications: [NATSConnection.Publication] = []
            for i in wave {
                publications.append(.init(subject: node.layout.natsSubject(of: drafts[i].subject), data: try EventLine.line(of: drafts[i]),
                                          messageID: drafts[i].id.description, expectedLastSubjectSequence: expected[drafts[i].subject], call: call))
            }
            var failure: (index: Int, error: LedgerError)?
            for (i, result) in zip(wave, node.connection.publish(publications)) {
                let subject = drafts[i].subject
                switch result {
                case .success(let ack) where ack.duplicate:
                    // JetStream's window of ids spans the whole stream: the id may be another
                    // subject's (another partition's, which this node's store does not see).
                    let stored = try node.connection.message(in: ClusterLayout.stream, at: ack.sequence)
                    guard stored?.subject == node.layout.natsSubject(of: subject) else {
                        var error = LedgerError.idConflict(drafts[i].id, storedAt: ack.sequence, index: i, subject: subject)
                        error.message = "event id \(drafts[i].id) is already stored at position \(ack.sequence) for another subject; an id names one fact, so give a new fact a new id"
                        if failure.map({ i < $0.index }) ?? true { failure = (i, error) }
                        continue
                    }
                    // The subject's last sequence and version are no longer known: read them
                    // again once the store has folded the stream that far.
                    lastSequences.withLock { $0[subject] = nil }
                    let latest = try node.connection.lastMessage(in: ClusterLayout.stream, subject: node.layout.natsSubject(of: subject))?.sequence ?? 0
                    guard waitForFold(latest) else { throw LedgerError(.unavailable, "partition \(partition) has not caught up with the stream yet; retry") }
                    outcomes[i] = .duplicate(position: ack.sequence)
                    if mine != nil, let local = try node.ledger.log.stored(as: drafts[i]) {
                        outcomes[i] = try outcome(ofStored: local.position, at: ack.sequence, published: stored, mine: mine)
                    }
                    expected[subject] = latest
                    versions[subject] = try node.ledger.version(of: subject)
                    last = max(last, latest)
                case .success(let ack):
                    let version: UInt64
                    if let known = versions[subject] { version = known } else { version = try node.ledger.version(of: subject) }
                    expected[subject] = ack.sequence
                    versions[subject] = version + 1
                    outcomes[i] = .appended(position: ack.sequence, version: version + 1)
                    last = max(last, ack.sequence)
                case .failure(var error):
                    // Another writer moved the subject: forget what this worker knew of it.
                    lastSequences.withLock { $0[subject] = nil }
                    if error.code == .wrongExpectedVersion {
                        error = LedgerError(.unavailable, "subject \(subject) was written by another node since partition \(partition) last read it; retry the batch (what was written counts as duplicates)",
                                            subject: subject)
                    }
                    error.index = i
                    if failure.map({ i < $0.index }) ?? true { failure = (i, error) }
                }
            }
            if let failure {
                _ = waitForFold(last)
                throw failure.error
            }
        }
        guard waitForFold(last) else {
            throw LedgerError(.unavailable, "the append is stored in the stream but partition \(partition) has not folded it yet; reads will show it shortly")
        }
        // Repeats of an id inside the batch report the position of its first occurrence.
        return drafts.indices.map { i in
            outcomes[i] ?? .duplicate(position: outcomes[firstOf[drafts[i].id] ?? i]?.position ?? 0)
        }
    }

    /// What an event already stored (at `local` in this node's store, `position` in the
    /// stream, `published` as the stream holds it) is to a retried append call `mine`:
    /// `.appended` when an earlier try of that call published it, else a duplicate.
    private func outcome(ofStored local: UInt64, at position: UInt64, published: NATSConnection.StoredMessage?,
                         mine: String?) throws(LedgerError) -> AppendOutcome {
        guard let mine, published?.call == mine, let version = try node.ledger.log.event(at: local, revealing: false)?.version else {
            return .duplicate(position: position)
        }
        return .appended(position: position, version: version)
    }

    /// Waits until the store has folded every message the stream holds of `subject`, and
    /// returns the last one's sequence (0: none).
    private func catchUp(_ subject: String) throws(LedgerError) -> UInt64 {
        let known = lastSequences.withLock { $0[subject] }
        var last: UInt64
        if let known { last = known } else {
            last = try node.connection.lastMessage(in: ClusterLayout.stream, subject: node.layout.natsSubject(of: subject))?.sequence ?? 0
        }
        guard waitForFold(last) else {
            throw LedgerError(.unavailable, "partition \(partition) has not caught up with the stream yet; retry")
        }
        return last
    }

    // MARK: Reads

    private func handleRead(_ request: [UInt8]) -> [UInt8] {
        do throws(LedgerError) {
            let object = try ClusterWire.object(request, what: "read request")
            // A read sees every event of its subject the stream held when it came.
            if let subject = ClusterWire.string(object["subject"]), node.layout.partition(of: subject) == partition { _ = try catchUp(subject) }
            return ClusterWire.ok(try node.answer(object, partition: partition))
        } catch {
            return ClusterWire.failure(error)
        }
    }
}
