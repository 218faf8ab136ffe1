import Foundation
import LedgerCore

/// Folded states encoded one after another in a few large buffers, each after its key: the
/// stored key (`ModelSchema.stateKey`) for a generation, else the key's own bytes. How every
/// fold's states are encoded: a rebuild's, to write a generation; an append's touched states
/// and `verify`'s, through `StateFold.encodedStates()`.
///
/// A rebuild writes every state of every model. Encoded as two arrays per state (its key and
/// its bytes), then given stored keys, sorted and merged model by model, the states took half
/// as long to lay out as to encode (0.49 s against 0.94 s in a rebuild of 100,000 customers'
/// 300,000 states), and putting them from those arrays as long again.
struct EncodedStates {
    /// The entries one thread encoded, in order.
    struct Run {
        var bytes: [UInt8] = []
        /// Where each entry's stored key begins in `bytes`, where its state begins, and where
        /// it ends.
        var entries: [(key: Int, state: Int, end: Int)] = []

        /// Calls `body` with the stored key (or bare key) and state of each entry in `range`.
        func forEach(in range: Range<Int>, _ body: (_ key: UnsafeRawBufferPointer, _ state: UnsafeRawBufferPointer) throws -> Void) rethrows {
            try bytes.withUnsafeBytes { bytes in
                for entry in entries[range] {
                    try body(UnsafeRawBufferPointer(rebasing: bytes[entry.key ..< entry.state]), UnsafeRawBufferPointer(rebasing: bytes[entry.state ..< entry.end]))
                }
            }
        }
    }

    let runs: [Run]
    let count: Int

    /// Below this many keys, one thread encodes them (an append's few hundred).
    static var parallelFrom: Int { 4_096 }

    /// The states `models` hold (folds over one key table), key by key in the keys' byte order,
    /// and in each key model by model in their tags' order, encoded on every core. Each state
    /// follows its stored key in its model's generation (the generations are one generation,
    /// each model with its own tag or none), or with no generation its key's own bytes (one
    /// model alone).
    init(_ models: [(fold: any StateFold, generation: Generation?)]) {
        let plan = Self.plan(models)
        var runs = [Run](repeating: Run(), count: plan.chunks)
        runs.withUnsafeMutableBufferPointer { buffer in
            let work = EncodingWork(runs: buffer, keys: plan.keys, models: plan.models, ranges: plan.ranges)
            DispatchQueue.concurrentPerform(iterations: plan.chunks) { chunk in work.encode(chunk) }
        }
        self.runs = runs
        count = runs.reduce(0) { $0 + $1.entries.count }
    }

    /// The same entries as `init`, in runs handed to `write` on the calling thread in order,
    /// each as soon as it is encoded, while the other cores encode the runs after it: a
    /// rebuild writes and commits (fsync) the states encoded so far meanwhile, instead of
    /// after the last, in `forEach`'s order. Each run is freed once written. What `write`
    /// throws is thrown once every run is encoded.
    ///
    /// The encoding runs on a thread of its own (with `concurrentPerform`'s helpers, when the
    /// pool has any to lend), not on a pool thread: the caller blocks until each run is done,
    /// and an embedding app may call from a pool thread itself, so the encoding must never
    /// wait for the pool.
    static func streamed(_ models: [(fold: any StateFold, generation: Generation?)], write: (Run) throws -> Void) throws {
        let plan = Self.plan(models, chunksPerCore: 8)
        let encoded = (0 ..< plan.chunks).map { _ in DispatchSemaphore(value: 0) }
        var runs = [Run](repeating: Run(), count: plan.chunks)
        try runs.withUnsafeMutableBufferPointer { buffer in
            let work = EncodingWork(runs: buffer, keys: plan.keys, models: plan.models, ranges: plan.ranges)
            let finished = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                DispatchQueue.concurrentPerform(iterations: work.ranges.count) { chunk in
                    work.encode(chunk)
                    encoded[chunk].signal()
                }
                finished.signal()
            }
            // Every run is waited for, even after a failure: the encoders write into `runs`.
            var failure: (any Error)?
            for chunk in 0 ..< plan.chunks {
                encoded[chunk].wait()
                if failure == nil {
                    do { try write(buffer[chunk]) } catch { failure = error }
                }
                buffer[chunk] = Run()
            }
            finished.wait()
            if let failure { throw failure }
        }
    }

    /// The keys `models` hold in byte order, and how they are cut into chunks for the cores.
    private struct Plan {
        let models: [(fold: any StateFold, generation: Generation?)]
        let keys: [(key: [UInt8], slot: Int)]
        /// Each chunk's share of `keys`.
        let ranges: [Range<Int>]
        var chunks: Int { ranges.count }
    }

    private static func plan(_ models: [(fold: any StateFold, generation: Generation?)], chunksPerCore: Int = 4) -> Plan {
        let models = models.sorted { ($0.generation?.tag.map(Int.init) ?? -1) < ($1.generation?.tag.map(Int.init) ?? -1) }
        guard let table = models.first?.fold.table else { return Plan(models: [], keys: [], ranges: []) }
        let keys = table.keys
        var sorted: [(key: [UInt8], slot: Int)] = []
        for slot in keys.indices where models.contains(where: { $0.fold.holds(slot) }) {
            sorted.append((Array(keys[slot].utf8), slot))
        }
        sorted.sort { $0.key.precedesInByteOrder($1.key) }
        let chunks = sorted.count < Self.parallelFrom ? 1 : ProcessInfo.processInfo.activeProcessorCount * chunksPerCore
        let size = (sorted.count + chunks - 1) / chunks
        return Plan(models: models, keys: sorted, ranges: (0 ..< chunks).map { min($0 * size, sorted.count) ..< min(($0 + 1) * size, sorted.count) })
    }

    /// Calls `body` with each entry's stored key (or bare key) and state, in key byte order
    /// and in each key model by model. With tags that is not always the store's order (a key
    /// that another begins with, followed by a byte below the tags, sorts between the other's
    /// states): a writer that appends checks each key (`ProjectionEngine.writeShadows`).
    func forEach(_ body: (_ key: UnsafeRawBufferPointer, _ state: UnsafeRawBufferPointer) throws -> Void) rethrows {
        for run in runs { try run.forEach(in: run.entries.indices, body) }
    }

    /// Each entry's key and state as arrays, in `forEach`'s order.
    var pairs: [(key: [UInt8], state: [UInt8])] {
        var pairs: [(key: [UInt8], state: [UInt8])] = []
        pairs.reserveCapacity(count)
        forEach { key, state in pairs.append((Array(key), Array(state))) }
        return pairs
    }
}

/// What the encoding threads read, and the runs each writes one of.
private struct EncodingWork: @unchecked Sendable {
    // @unchecked: each thread writes its own slot of `runs`; the folds' states are only read.
    let runs: UnsafeMutableBufferPointer<EncodedStates.Run>
    let keys: [(key: [UInt8], slot: Int)]
    let models: [(fold: any StateFold, generation: Generation?)]
    let ranges: [Range<Int>]

    /// How many keys ahead of the one it encodes a thread starts loading states.
    private static let prefetchAhead = 8

    /// Encodes the `chunk`th share of the keys into its run.
    func encode(_ chunk: Int) { runs[chunk] = encode(keys[ranges[chunk]]) }

    func encode(_ keys: ArraySlice<(key: [UInt8], slot: Int)>) -> EncodedStates.Run {
        var writer = StateWriter()
        var entries: [(key: Int, state: Int, end: Int)] = []
        entries.reserveCapacity(keys.count * models.count)
        // Each model's fold, and its generation's number and tag, taken out once: read from the
        // tuples for every key, they were retained and released for every key.
        let folds = models.map(\.fold)
        let places = models.map { $0.generation.map { (id: $0.id, tag: $0.tag) } }
        keys.withUnsafeBufferPointer { keys in
            for i in keys.indices {
                // The states of the key `prefetchAhead` on start loading while this one encodes:
                // the keys come in byte order, their states in the order the fold met them.
                if i + Self.prefetchAhead < keys.count {
                    let slot = keys[i + Self.prefetchAhead].slot
                    for fold in folds { fold.prefetch(slot) }
                }
                let slot = keys[i].slot
                for m in folds.indices where folds[m].holds(slot) {
                    let keyStart = writer.written
                    if let place = places[m] {
                        ModelSchema.withStateKey(place.id, keys[i].key, tag: place.tag) { writer.writeRaw($0) }
                    } else {
                        keys[i].key.withUnsafeBytes { writer.writeRaw($0) }
                    }
                    let stateStart = writer.written
                    _ = folds[m].encodeState(slot, into: &writer)
                    entries.append((keyStart, stateStart, writer.written))
                }
            }
        }
        return EncodedStates.Run(bytes: writer.bytes, entries: entries)
    }
}
