import CNATS
@_spi(Storage) import LedgerCore

/// A JetStream key-value bucket: values under keys, each change a new revision, and writes
/// that check the revision they replace (the partition leases).
package final class KeyValueBucket: @unchecked Sendable {
    private let store: OpaquePointer
    private let connection: NATSConnection
    package let name: String

    /// Opens the bucket `name`, creating it (file storage, `replicas` copies, history 1) when
    /// there is none. With `ttl` (milliseconds), a value not written again for that long goes:
    /// a lease its holder stopped renewing.
    /// Without `create`, a bucket that does not exist is an `.unavailable` error.
    package init(_ connection: NATSConnection, name: String, replicas: Int, ttl: Int64? = nil, create: Bool = true) throws(LedgerError) {
        self.name = name
        self.connection = connection
        self.store = try connection.retrying("opening the key-value bucket \(name)") { () throws(LedgerError) -> OpaquePointer in
            var store: OpaquePointer?
            let found = js_KeyValue(&store, connection.jetStreamContext, name)
            if found == NATS_OK, let store { return store }
            if !create && found == NATS_NOT_FOUND {
                throw LedgerError(.invalidArgument, "there is no key-value bucket \(name)")
            }
            var config = kvConfig()
            kvConfig_Init(&config)
            config.History = 1
            config.Replicas = Int32(replicas)
            config.StorageType = js_FileStorage
            if let ttl { config.TTL = ttl * 1_000_000 }  // nats.c takes nanoseconds
            let status = name.withCString { bucket in
                config.Bucket = bucket
                return js_CreateKeyValue(&store, connection.jetStreamContext, &config)
            }
            guard status == NATS_OK, let store else {
                throw NATSConnection.failure(status, jsErrCode(0), doing: "creating the key-value bucket \(name)")
            }
            return store
        }
    }

    deinit { kvStore_Destroy(store) }

    /// A value and the revision that wrote it.
    package struct Entry: Sendable, Hashable {
        package var value: [UInt8]
        package var revision: UInt64
    }

    /// The value under `key`, `nil` when there is none (never written, deleted or expired).
    package func get(_ key: String) throws(LedgerError) -> Entry? {
        var entry: OpaquePointer?
        let status = kvStore_Get(&entry, store, key)
        if status == NATS_NOT_FOUND { return nil }
        guard status == NATS_OK, let entry else { throw NATSConnection.failure(status, jsErrCode(0), doing: "reading \(key) in \(name)") }
        defer { kvEntry_Destroy(entry) }
        return Self.entry(entry)
    }

    /// An entry's value and revision, copied out of nats.c's.
    private static func entry(_ entry: OpaquePointer) -> Entry {
        let count = Int(kvEntry_ValueLen(entry))
        var value: [UInt8] = []
        if count > 0, let bytes = kvEntry_Value(entry) {
            value = Array(UnsafeRawBufferPointer(start: bytes, count: count))
        }
        return Entry(value: value, revision: kvEntry_Revision(entry))
    }

    /// Writes `value` under `key` only if the key holds nothing; returns the new revision, or
    /// `nil` when another value is there.
    package func create(_ key: String, _ value: [UInt8]) throws(LedgerError) -> UInt64? {
        var revision: UInt64 = 0
        let status = value.withUnsafeBytes { kvStore_Create(&revision, store, key, $0.baseAddress, Int32($0.count)) }
        if status == NATS_OK { return revision }
        if Self.refused(status) { return nil }
        throw NATSConnection.failure(status, jsErrCode(0), doing: "creating \(key) in \(name)")
    }

    /// Writes `value` under `key` only if its revision is still `revision`; returns the new
    /// revision, or `nil` when someone wrote it since.
    package func update(_ key: String, _ value: [UInt8], revision: UInt64) throws(LedgerError) -> UInt64? {
        var next: UInt64 = 0
        let status = value.withUnsafeBytes { kvStore_Update(&next, store, key, $0.baseAddress, Int32($0.count), revision) }
        if status == NATS_OK { return next }
        if Self.refused(status) { return nil }
        throw NATSConnection.failure(status, jsErrCode(0), doing: "updating \(key) in \(name)")
    }

    /// Deletes the value under `key` if its revision is still `revision` (a holder giving a
    /// lease back); `false` when someone wrote it since.
    package func delete(_ key: String, revision: UInt64) throws(LedgerError) -> Bool {
        // nats.c 3.4 has no revision-checked delete: overwrite with an empty value instead,
        // which every reader takes as "nobody holds it".
        try update(key, [], revision: revision) != nil
    }

    func putUnchecked(_ key: String, _ value: [UInt8]) throws(LedgerError) {
        var revision: UInt64 = 0
        let status = value.withUnsafeBytes { kvStore_Put(&revision, store, key, $0.baseAddress, Int32($0.count)) }
        guard status == NATS_OK else { throw NATSConnection.failure(status, jsErrCode(0), doing: "writing \(key) in \(name)") }
    }

    /// One write of `write(_:)`: `value` under `key`, only if the key is still at `revision`
    /// (`0`: only if it holds nothing).
    package struct Write: Sendable {
        package var key: String
        package var value: [UInt8]
        package var revision: UInt64
    }

    /// Makes `writes` together, sending each before waiting for any answer (a node's leases:
    /// one round trip for all of them, however many): each one's new revision, `nil` when the
    /// key was not at the revision given, or `.unavailable` when no answer came in time (it
    /// may have been written).
    package func write(_ writes: [Write]) -> [Result<UInt64?, LedgerError>] {
        // A key's values are the bucket's stream's messages under `$KV.<bucket>.<key>`, and its
        // revision their sequence: a publish that expects the subject's last sequence.
        let publications = writes.map { write in
            NATSConnection.Publication(subject: "$KV.\(name).\(write.key)", data: write.value, messageID: nil, expectedLastSubjectSequence: write.revision)
        }
        return connection.publish(publications).map { result in
            switch result {
            case .success(let ack): .success(ack.sequence)
            case .failure(let error) where error.code == .wrongExpectedVersion: .success(nil)
            case .failure(let error): .failure(error)
            }
        }
    }

    /// Every key's value and revision, read in one pass (a watcher that delivers the latest
    /// value of each key, then says it has delivered them all).
    package func entries() throws(LedgerError) -> [String: Entry] {
        var options = kvWatchOptions()
        kvWatchOptions_Init(&options)
        options.IgnoreDeletes = true
        var watcher: OpaquePointer?
        let status = kvStore_WatchAll(&watcher, store, &options)
        guard status == NATS_OK, let watcher else { throw NATSConnection.failure(status, jsErrCode(0), doing: "reading the keys of \(name)") }
        defer { kvWatcher_Destroy(watcher) }
        var found: [String: Entry] = [:]
        while true {
            var entry: OpaquePointer?
            let next = kvWatcher_Next(&entry, watcher, connection.timeout)
            guard next == NATS_OK else { throw NATSConnection.failure(next, jsErrCode(0), doing: "reading the keys of \(name)") }
            // The end of the values there were when the watcher started.
            guard let entry else { return found }
            defer { kvEntry_Destroy(entry) }
            if let key = kvEntry_Key(entry).map({ String(cString: $0) }) { found[key] = Self.entry(entry) }
        }
    }

    /// Deletes the value under `key`, whatever its revision (a node leaving).
    package func remove(_ key: String) throws(LedgerError) {
        let status = kvStore_Delete(store, key)
        guard status == NATS_OK else { throw NATSConnection.failure(status, jsErrCode(0), doing: "deleting \(key) in \(name)") }
    }

    /// Every key with a value.
    package func keys() throws(LedgerError) -> [String] {
        var list = kvKeysList()
        let status = kvStore_Keys(&list, store, nil)
        if status == NATS_NOT_FOUND { return [] }
        guard status == NATS_OK else { throw NATSConnection.failure(status, jsErrCode(0), doing: "listing the keys of \(name)") }
        defer { kvKeysList_Destroy(&list) }
        return (0..<Int(list.Count)).compactMap { list.Keys[$0].map { String(cString: $0) } }
    }

    /// A create or an update refused because the key's revision is not the one expected.
    private static func refused(_ status: natsStatus) -> Bool {
        var last = NATS_OK
        let text = nats_GetLastError(&last).map { String(cString: $0) } ?? ""
        return text.contains("wrong last sequence") || text.contains("10071") || text.contains("key exists")
    }
}

extension KeyValueBucket {
    /// Writes `value` under `key` whatever is there (a node's heartbeat).
    package func put(_ key: String, _ value: [UInt8]) throws(LedgerError) {
        try putUnchecked(key, value)
    }
}
