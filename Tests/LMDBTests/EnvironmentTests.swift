import Foundation
import Glibc
@_spi(Storage) import LMDB
import Synchronization
import Testing

/// A fresh directory under the system's temporary folder, removed when `body` returns.
func withTemporaryDirectory<R>(_ body: (String) throws -> R) throws -> R {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("lmdb-tests-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try body(path)
}

func bigEndian(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

/// The u64 that `bigEndian` wrote.
func integer(_ bytes: UnsafeRawBufferPointer) -> UInt64 { bytes.reduce(0) { $0 << 8 | UInt64($1) } }

/// Entries in `db`, walked with a cursor.
func entryCount(_ txn: borrowing Transaction, _ db: Database) throws -> Int {
    try txn.withCursor(db) { cursor in
        var count = 0
        var entry = try cursor.first()
        while entry != nil { count += 1; entry = try cursor.next() }
        return count
    }
}

/// The values of the key under `cursor` from where it stands, each read as a u64.
func duplicates(from start: Entry?, _ cursor: borrowing Cursor) throws -> [UInt64] {
    var values: [UInt64] = []
    var entry = start
    while let e = entry {
        values.append(integer(e.value))
        entry = try cursor.nextDuplicate()
    }
    return values
}

func mode(of path: String) -> mode_t {
    var st = stat()
    stat(path, &st)
    return st.st_mode & 0o777
}

@Suite struct EnvironmentTests {
    @Test func storeFilesAreReadableByTheOwnerOnly() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let db = try env.openDatabase("things")
            try env.write { txn in try txn.put(db, key: [1], value: [2]) }
            #expect(mode(of: path) == 0o700)
            #expect(mode(of: path + "/data.mdb") == 0o600)
            #expect(mode(of: path + "/lock.mdb") == 0o600)
        }
    }

    @Test func writeCommitsWhenTheClosureReturns() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let db = try env.openDatabase("things")
            try env.write { txn in try txn.put(db, key: Array("k".utf8), value: Array("v".utf8)) }
            let value = try env.read { txn in try txn.get(db, key: Array("k".utf8)).map { Array($0) } }
            #expect(value == Array("v".utf8))
        }
    }

    @Test func writeAbortsWhenTheClosureThrows() throws {
        struct Stop: Error {}
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let db = try env.openDatabase("things")
            #expect(throws: Stop.self) {
                try env.write { txn in
                    try txn.put(db, key: Array("k".utf8), value: Array("v".utf8))
                    throw Stop()
                }
            }
            let value = try env.read { txn in try txn.get(db, key: Array("k".utf8)).map { Array($0) } }
            #expect(value == nil)
        }
    }

    @Test func namedDatabasesKeepTheirOwnKeys() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let a = try env.openDatabase("a")
            let b = try env.openDatabase("b")
            try env.write { txn in
                try txn.put(a, key: [1], value: [10])
                try txn.put(b, key: [1], value: [20])
            }
            let values = try env.read { txn in
                (try txn.get(a, key: [1]).map { Array($0) }, try txn.get(b, key: [1]).map { Array($0) }, try txn.count(a))
            }
            #expect(values.0 == [10])
            #expect(values.1 == [20])
            #expect(values.2 == 1)
        }
    }

    @Test func cursorWalksBigEndianKeysInNumericOrder() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let db = try env.openDatabase("numbers")
            try env.write { txn in
                for n in (1...300).shuffled() { try txn.put(db, key: bigEndian(UInt64(n)), value: [UInt8(n % 256)]) }
            }
            let (forward, backward, seeked) = try env.read { txn in
                try txn.withCursor(db) { cursor in
                    var forward: [UInt64] = []
                    var entry = try cursor.first()
                    while let e = entry {
                        forward.append(e.key.reduce(0) { $0 << 8 | UInt64($1) })
                        entry = try cursor.next()
                    }
                    var backward: [UInt64] = []
                    entry = try cursor.last()
                    while let e = entry {
                        backward.append(e.key.reduce(0) { $0 << 8 | UInt64($1) })
                        entry = try cursor.previous()
                    }
                    let seeked = try cursor.seek(atLeast: bigEndian(256)).map { $0.key.reduce(0) { $0 << 8 | UInt64($1) } }
                    return (forward, backward, seeked)
                }
            }
            #expect(forward == Array(1...300))
            #expect(backward == Array((1...300).reversed()))
            #expect(seeked == 256)
        }
    }

    /// A `.dupSort, .dupFixed` database keeps a key's values sorted; the cursor finds the
    /// first value at or above a given one and steps through the key's values only.
    @Test func fixedSizeDuplicatesAreSortedAndSeekable() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let db = try env.openDatabase("dups", flags: [.create, .dupSort, .dupFixed])
            try env.write { txn in
                for n in [40, 10, 30, 20] { try txn.put(db, key: [1], value: bigEndian(UInt64(n)), flags: .noDupData) }
                try txn.put(db, key: [2], value: bigEndian(5))
                #expect(throws: LMDBError.self) { try txn.put(db, key: [1], value: bigEndian(30), flags: .noDupData) }
                #expect(try txn.delete(db, key: [1], value: bigEndian(20)))
                #expect(try !txn.delete(db, key: [1], value: bigEndian(21)))
            }
            let key: [UInt8] = [1]
            let (fromAbove15, fromAbove41, count) = try env.read { txn in
                let found = try [UInt64(15), 41].map { start in
                    try txn.withCursor(db) { cursor in
                        let value = bigEndian(start)
                        let entry = try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try cursor.seek(key: k, valueAtLeast: v) } }
                        return try duplicates(from: entry, cursor)
                    }
                }
                return (found[0], found[1], try txn.count(db))
            }
            #expect(fromAbove15 == [30, 40])
            #expect(fromAbove41 == [])
            #expect(count == 4)
        }
    }

    /// A database opened inside a write transaction exists once it commits; one dropped there
    /// is gone.
    @Test func databasesAreOpenedAndDroppedInsideAWriteTransaction() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let old = try env.openDatabase("old")
            try env.write { txn in try txn.put(old, key: [1], value: [1]) }
            try env.write { txn in
                #expect(try txn.openDatabase("missing", flags: []) == nil)
                let new = try #require(try txn.openDatabase("new", flags: [.create]))
                try txn.put(new, key: [7], value: [7])
                try txn.drop(old)
            }
            let new = try env.openDatabase("new", flags: [])
            #expect(try env.read { txn in try txn.get(new, key: [7]).map { Array($0) } } == [7])
            #expect(throws: LMDBError.self) { try env.openDatabase("old", flags: []) }
        }
    }

    @Test func readsAreZeroCopyPointersIntoTheMap() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let db = try env.openDatabase("things")
            let big = [UInt8](repeating: 7, count: 100_000)
            try env.write { txn in try txn.put(db, key: [1], value: big) }
            try env.read { txn in
                let first = try txn.get(db, key: [1])
                let second = try txn.get(db, key: [1])
                // The same bytes in the map both times: nothing was copied out.
                #expect(first?.baseAddress == second?.baseAddress)
                #expect(first?.count == big.count)
                #expect(first.map { $0.allSatisfy { $0 == 7 } } == true)
            }
        }
    }

    @Test func reservedPutWritesStraightIntoTheMap() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let db = try env.openDatabase("things")
            try env.write { txn in
                try [UInt8(9)].withUnsafeBytes { key in
                    try txn.put(db, key: key, reserving: 4) { out in
                        for i in 0..<4 { out[i] = UInt8(i) }
                    }
                }
            }
            let value = try env.read { txn in try txn.get(db, key: [9]).map { Array($0) } }
            #expect(value == [0, 1, 2, 3])
        }
    }

    @Test func mapGrowsWhenManyWritesFillIt() throws {
        try withTemporaryDirectory { path in
            var config = Environment.Configuration()
            config.mapSize = 64 << 10
            let env = try Environment(path: path, configuration: config)
            let db = try env.openDatabase("things")
            let value = [UInt8](repeating: 1, count: 1000)
            for n in 0..<5_000 {
                try env.write { txn in try txn.put(db, key: bigEndian(UInt64(n)), value: value) }
            }
            #expect(env.growths > 0)
            #expect(env.info().mapSize > 5_000 * 1000)
            #expect(try env.read { txn in try txn.count(db) } == 5_000)
        }
    }

    @Test func mapGrowsWhenOneTransactionOverfillsIt() throws {
        try withTemporaryDirectory { path in
            var config = Environment.Configuration()
            config.mapSize = 64 << 10
            let env = try Environment(path: path, configuration: config)
            let db = try env.openDatabase("things")
            var attempts = 0
            try env.write { txn in
                attempts += 1
                for n in 0..<4_000 { try txn.put(db, key: bigEndian(UInt64(n)), value: [UInt8](repeating: 2, count: 1000)) }
            }
            #expect(attempts > 1)
            #expect(try env.read { txn in try txn.count(db) } == 4_000)
        }
    }

    @Test func errorsCarryTheLMDBCodeAndSayWhatToDo() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let db = try env.openDatabase("things")
            try env.write { txn in try txn.put(db, key: [1], value: [1]) }
            do {
                try env.write { txn in try txn.put(db, key: [1], value: [2], flags: .noOverwrite) }
                Issue.record("a second put with .noOverwrite should fail")
            } catch let error as LMDBError {
                #expect(error.code == .keyExists)
                #expect(error.returnCode == -30799)
                #expect(error.operation == "mdb_put")
                #expect(error.description.contains("already stored"))
            }
        }
    }

    @Test func aSecondOpenOfTheSameStoreInOneProcessIsRefused() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            #expect(throws: LMDBError(code: .alreadyOpen, operation: "mdb_env_open", context: path)) {
                _ = try Environment(path: path)
            }
            _ = env
        }
    }

    @Test func theStoreCanBeOpenedAgainOnceReleased() throws {
        try withTemporaryDirectory { path in
            do {
                let env = try Environment(path: path)
                let db = try env.openDatabase("things")
                try env.write { txn in try txn.put(db, key: [1], value: [42]) }
            }
            let env = try Environment(path: path)
            let db = try env.openDatabase("things", flags: [])
            #expect(try env.read { txn in try txn.get(db, key: [1]).map { Array($0) } } == [42])
        }
    }

    @Test func readOnlyOpenOfAMissingStoreSaysSo() throws {
        try withTemporaryDirectory { path in
            var config = Environment.Configuration()
            config.flags = .readOnly
            do {
                _ = try Environment(path: path, configuration: config)
                Issue.record("opening a missing store read-only should fail")
            } catch let error as LMDBError {
                #expect(error.code == .noSuchFile)
            }
        }
    }
}

@Suite struct NestedWriteTests {
    @Test func aWriteInsideAWriteOnTheSameThreadIsRefusedNotDeadlocked() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let db = try env.openDatabase("things")
            try env.write { txn in
                try txn.put(db, key: [1], value: [1])
                #expect(throws: LMDBError(code: .nestedWrite, operation: "mdb_txn_begin", context: path)) {
                    try env.write { _ in }
                }
                #expect(throws: LMDBError(code: .nestedWrite, operation: "mdb_dbi_open", context: "other")) {
                    _ = try env.openDatabase("other")
                }
            }
            #expect(try env.read { txn in try txn.count(db) } == 1)
        }
    }
}

/// Reads: each in a transaction of its own, seeing the last commit before it.
@Suite struct ReadTests {
    @Test func aReadSeesTheCommitsBeforeIt() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let db = try env.openDatabase("things")
            for n: UInt64 in 1...3 {
                try env.write { txn in try txn.put(db, key: bigEndian(n), value: [UInt8(n)]) }
                let seen = try env.read { txn in (try txn.get(db, key: bigEndian(n)).map { Array($0) }, try entryCount(txn, db)) }
                #expect(seen.0 == [UInt8(n)])
                #expect(seen.1 == Int(n), "the cursor walks this read's snapshot")
            }
        }
    }

    @Test func twoCursorsOverOneDatabaseAtOnceEachKeepTheirPlace() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let things = try env.openDatabase("things")
            let others = try env.openDatabase("others")
            try env.write { txn in
                for n: UInt64 in 1...3 { try txn.put(things, key: bigEndian(n), value: [UInt8(n)]) }
                try txn.put(others, key: [9], value: [9])
            }
            for _ in 0..<2 {
                let pairs = try env.read { txn in
                    try txn.withCursor(things) { outer in
                        var pairs: [[UInt8]] = []
                        var a = try outer.first()
                        while let current = a {
                            let first = Array(current.value)
                            let inner = try txn.withCursor(things) { inner in try inner.last().map { Array($0.value) } }
                            let other = try txn.withCursor(others) { cursor in try cursor.first().map { Array($0.value) } }
                            pairs.append(first + (inner ?? []) + (other ?? []))
                            a = try outer.next()
                        }
                        return pairs
                    }
                }
                #expect(pairs == [[1, 3, 9], [2, 3, 9], [3, 3, 9]])
            }
        }
    }

    @Test func readsWorkOnceTheMapHasGrown() throws {
        try withTemporaryDirectory { path in
            var config = Environment.Configuration()
            config.mapSize = 64 << 10
            let env = try Environment(path: path, configuration: config)
            let db = try env.openDatabase("things")
            try env.write { txn in try txn.put(db, key: bigEndian(0), value: [0]) }
            _ = try env.read { txn in try txn.withCursor(db) { cursor in try cursor.first() } }
            for n in 1..<2_000 {
                try env.write { txn in try txn.put(db, key: bigEndian(UInt64(n)), value: [UInt8](repeating: 1, count: 500)) }
            }
            #expect(env.growths > 0)
            #expect(try env.read { txn in try entryCount(txn, db) } == 2_000)
        }
    }

    /// A database dropped and made again under its name, now with sorted duplicates, may take
    /// the old handle's number: a cursor over it has the duplicates' sub-cursor.
    @Test func aDatabaseMadeAgainAfterADropGetsANewCursor() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let plain = try env.openDatabase("things")
            try env.write { txn in try txn.put(plain, key: [1], value: [1]) }
            _ = try env.read { txn in try txn.withCursor(plain) { cursor in try cursor.first() } }
            try env.write { txn in try txn.drop(plain) }
            let dups = try env.openDatabase("things", flags: [.create, .dupSort, .dupFixed])
            try env.write { txn in
                for n: UInt64 in [3, 1, 2] { try txn.put(dups, key: [1], value: bigEndian(n), flags: .noDupData) }
            }
            let values = try env.read { txn in try txn.withCursor(dups) { cursor in try duplicates(from: try cursor.first(), cursor) } }
            #expect(values == [1, 2, 3])
        }
    }
}
