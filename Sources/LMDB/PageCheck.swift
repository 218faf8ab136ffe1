import CLMDB
import Glibc

/// A page of `data.mdb` that is not what the B-tree above it says it is.
@_spi(Storage) public struct PageDamage: Sendable, Hashable, CustomStringConvertible {
    /// The page number (its byte offset is `page × page size`).
    public let page: Int
    /// The tree it belongs to: `free`, `main`, or a named database (`events`…).
    public let tree: String
    /// What is wrong.
    public let problem: String

    public var description: String { "page \(page) of data.mdb (\(tree)): \(problem)" }
}

/// What a walk over the store's pages found.
@_spi(Storage) public struct PageCheckReport: Sendable, Hashable {
    /// Pages read and checked (branch, leaf and overflow pages reached from the roots).
    public let pagesChecked: Int
    /// The first damaged page, `nil` when every page reached is sound.
    public let damage: PageDamage?
}

extension Environment {
    /// Walks every tree of the last commit's snapshot reading `data.mdb` itself, checking what
    /// liblmdb trusts without checking: each page's number, type and bounds, every node's
    /// bounds, child and overflow page numbers, tree depths, and that no page is reached twice.
    ///
    /// liblmdb follows a damaged page number or offset into the map and faults (SIGSEGV,
    /// SIGBUS, an assertion); this walk reports the page instead. Run it before anything that
    /// reads every page (`verify`, `export`). It reads the whole file once, inside one read
    /// transaction (so a writer beside it cannot reuse the pages it reads; a growth of the map
    /// in this process waits for the walk to end).
    /// - Parameter trees: the named databases to walk (all when `nil`); the free-page tree and
    ///   the main tree that names them are always walked.
    /// - Throws: `LMDBError` when the file cannot be read at all.
    public func checkPages(trees: Set<String>? = nil) throws(LMDBError) -> PageCheckReport {
        let fd = open(path + "/data.mdb", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw LMDBError(errno, "open", path + "/data.mdb") }
        defer { close(fd) }
        var stats = MDB_stat()
        try check(mdb_env_stat(handle, &stats), "mdb_env_stat", path)
        let pageSize = Int(stats.ms_psize)
        // A commit between the read transaction's start and reading the meta pages can leave
        // neither meta naming the snapshot: try again.
        for _ in 0..<8 {
            let report: PageCheckReport?
            do {
                report = try read { txn -> PageCheckReport? in
                    let walk = PageWalk(fd: fd, pageSize: pageSize, trees: trees)
                    return try walk.run(snapshot: UInt64(mdb_txn_id(txn.handle)))
                }
            } catch let error as LMDBError {
                throw error
            } catch {
                throw LMDBError(code: .invalid, operation: "checking pages", context: "\(error)")
            }
            if let report { return report }
        }
        throw LMDBError(code: .mapResized, operation: "checking pages", context: "the store kept changing under the walk; run it again")
    }
}

/// One walk over the trees of one snapshot. Every offset and page number is checked before it
/// is used; nothing read from the file is trusted.
private final class PageWalk {
    // liblmdb's layout (mdb.c): a page header is pgno (8) ‖ pad (2) ‖ flags (2) ‖ lower (2) ‖
    // upper (2), or pgno ‖ pad ‖ flags ‖ overflow page count (4); node pointers follow it.
    static let headerSize = 16
    static let branch: UInt16 = 0x01, leaf: UInt16 = 0x02, overflow: UInt16 = 0x04, meta: UInt16 = 0x08
    static let leaf2: UInt16 = 0x20, subpage: UInt16 = 0x40
    // A node is size or child low (2) ‖ high (2) ‖ flags (2) ‖ key size (2) ‖ key ‖ data.
    static let nodeSize = 8
    static let bigData: UInt16 = 0x01, subData: UInt16 = 0x02, dupData: UInt16 = 0x04
    // An MDB_db: pad (4) ‖ flags (2) ‖ depth (2) ‖ branch, leaf, overflow pages, entries, root (8 each).
    static let dbSize = 48
    static let noPage = UInt64.max
    static let magic: UInt32 = 0xBEEF_C0DE

    let fd: Int32
    let pageSize: Int
    let trees: Set<String>?
    var lastPage = 0
    var visited = Set<Int>()
    var damage: PageDamage?

    init(fd: Int32, pageSize: Int, trees: Set<String>?) {
        (self.fd, self.pageSize, self.trees) = (fd, pageSize, trees)
    }

    /// The report, or `nil` when neither meta page names `snapshot` (a commit came between).
    func run(snapshot: UInt64) throws(LMDBError) -> PageCheckReport? {
        var chosen: [UInt8]?
        for page in 0..<2 {
            let bytes = try read(page: page)
            guard bytes.count == pageSize else {
                return PageCheckReport(pagesChecked: 0, damage: PageDamage(page: page, tree: "meta", problem: "the file ends inside it"))
            }
            let meta = Self.headerSize
            guard u16(bytes, 10) & Self.meta != 0, u32(bytes, meta) == Self.magic else {
                return PageCheckReport(pagesChecked: 0, damage: PageDamage(page: page, tree: "meta", problem: "not a meta page (its flags or magic number are wrong)"))
            }
            if u64(bytes, meta + 24 + 2 * Self.dbSize + 8) == snapshot { chosen = bytes }
        }
        guard let meta = chosen else { return nil }
        let base = Self.headerSize + 24
        lastPage = Int(clamping: u64(meta, base + 2 * Self.dbSize))
        var size = stat()
        guard fstat(fd, &size) == 0 else { throw LMDBError(errno, "fstat", "data.mdb") }
        guard lastPage >= 1, lastPage < Int(size.st_size) / pageSize else {
            return PageCheckReport(pagesChecked: 0, damage: PageDamage(page: 0, tree: "meta",
                                                                       problem: "its last page, \(lastPage), lies beyond the file's \(Int(size.st_size) / pageSize) pages"))
        }
        try walk(db: Array(meta[base ..< base + Self.dbSize]), tree: "free", kind: .keys(fixed: false))
        if damage == nil { try walk(db: Array(meta[(base + Self.dbSize) ..< (base + 2 * Self.dbSize)]), tree: "main", kind: .main) }
        return PageCheckReport(pagesChecked: visited.count, damage: damage)
    }

    /// What a tree's leaves hold.
    enum Kind {
        /// The main tree: each leaf node names a database and holds its record.
        case main
        /// A database's keys; `fixed` when every value has one size (DUPFIXED), so a key's
        /// values may be a sub-page or a tree of fixed-size keys.
        case keys(fixed: Bool)
        /// A key's values, as a tree of their own (DUPSORT): plain leaves, or fixed-size ones
        /// (LEAF2) of `valueSize` bytes, the size its record gives and liblmdb reads them at.
        case values(valueSize: Int?)
    }

    /// Walks the tree an MDB_db record describes. In the main tree, a leaf node that holds a
    /// database record names a database: its tree is walked too (if asked for).
    func walk(db: [UInt8], tree: String, kind: Kind) throws(LMDBError) {
        let root = u64(db, 40), depth = Int(u16(db, 6))
        if root == Self.noPage { return }
        guard depth >= 1 else { return fail(Int(clamping: root), tree, "its tree claims depth 0 but has a root") }
        var stack: [(page: UInt64, level: Int)] = [(root, 1)]
        while let (number, level) = stack.popLast(), damage == nil {
            guard number >= 2, number <= UInt64(lastPage) else {
                return fail(Int(clamping: number), tree, "a page number beyond the file's last page, \(lastPage)")
            }
            let page = Int(number)
            guard visited.insert(page).inserted else { return fail(page, tree, "reached twice (a loop, or two trees sharing a page)") }
            let bytes = try read(page: page)
            guard bytes.count == pageSize else { return fail(page, tree, "the file ends inside it") }
            guard u64(bytes, 0) == number else { return fail(page, tree, "its header says it is page \(u64(bytes, 0))") }
            let flags = u16(bytes, 10)
            let isLeaf = level == depth
            let expected = isLeaf ? Self.leaf : Self.branch
            guard flags & (Self.branch | Self.leaf | Self.overflow | Self.meta) == expected else {
                return fail(page, tree, "its flags 0x\(String(flags, radix: 16)) say it is not the \(isLeaf ? "leaf" : "branch") page level \(level) of \(depth) must be")
            }
            let leaf2 = flags & Self.leaf2 != 0
            var fixedSize: Int?
            if case .values(let size) = kind { fixedSize = size }
            guard !leaf2 || (isLeaf && fixedSize != nil) else { return fail(page, tree, "fixed-size keys where the tree has none") }
            guard let count = keys(bytes, size: pageSize, leaf2: leaf2, expectedKeySize: fixedSize, page: page, tree: tree) else { return }
            if leaf2 { continue }   // fixed-size keys only, no nodes
            guard isLeaf || count >= 2 || tree == "free" else { return fail(page, tree, "a branch page with \(count) key; liblmdb needs at least 2") }
            for index in 0..<count {
                let offset = Int(u16(bytes, Self.headerSize + 2 * index))
                guard let node = node(bytes, at: offset, limit: pageSize, page: page, tree: tree, leaf: isLeaf) else { return }
                if !isLeaf {
                    stack.append((node.child, level + 1))
                    continue
                }
                switch kind {
                case .main:
                    // liblmdb keeps only database records in the main tree of a store like this.
                    guard node.flags & Self.subData != 0, node.flags & (Self.bigData | Self.dupData) == 0, node.dataSize == Self.dbSize else {
                        return fail(page, tree, "a node that is not a database record")
                    }
                    let record = Array(bytes[node.data ..< node.data + Self.dbSize])
                    let name = String(decoding: bytes[node.key ..< node.key + node.keySize], as: UTF8.self)
                    let fixed = u16(record, 4) & UInt16(MDB_DUPFIXED) != 0
                    if trees?.contains(name) ?? true { try walk(db: record, tree: name, kind: .keys(fixed: fixed)) }
                case .keys(let fixed):
                    if node.flags & Self.bigData != 0 {
                        guard node.flags & (Self.subData | Self.dupData) == 0 else { return fail(page, tree, "a value both on overflow pages and a key's values") }
                        try checkOverflow(node.overflow, dataSize: node.dataSize, tree: tree)
                    } else if node.flags & Self.subData != 0 {
                        // A key's values, as a tree of their own.
                        guard node.flags & Self.dupData != 0, node.dataSize == Self.dbSize else {
                            return fail(page, tree, "a database record (\(node.dataSize) bytes) where a key's values belong")
                        }
                        let record = Array(bytes[node.data ..< node.data + Self.dbSize])
                        try walk(db: record, tree: tree, kind: .values(valueSize: fixed ? Int(u32(record, 0)) : nil))
                    } else if node.flags & Self.dupData != 0 {
                        // A key's few values, as a page inside the node.
                        try checkSubpage(Array(bytes[node.data ..< node.data + node.dataSize]), fixed: fixed, page: page, tree: tree)
                    }
                case .values:
                    guard node.flags == 0 else { return fail(page, tree, "a key's value that is itself more than a value") }
                }
                if damage != nil { return }
            }
        }
    }

    /// A key's few values kept inside its node: a small page of their own, fixed-size values
    /// (LEAF2) for a DUPFIXED database, else nodes.
    func checkSubpage(_ sub: [UInt8], fixed: Bool, page: Int, tree: String) throws(LMDBError) {
        let flags = u16(sub, 10)
        guard sub.count >= Self.headerSize, flags & Self.subpage != 0, flags & Self.leaf != 0 else { return fail(page, tree, "a key's values are not a sub-page") }
        let leaf2 = flags & Self.leaf2 != 0
        guard leaf2 == fixed else { return fail(page, tree, "a key's values are laid out unlike the database's") }
        // A sub-page's fixed size is its own (liblmdb reads them at it): bounds only.
        guard let count = keys(sub, size: sub.count, leaf2: leaf2, page: page, tree: tree), !leaf2 else { return }
        for index in 0..<count {
            guard let node = node(sub, at: Int(u16(sub, Self.headerSize + 2 * index)), limit: sub.count, page: page, tree: tree, leaf: true) else { return }
            guard node.flags == 0 else { return fail(page, tree, "a key's value that is itself more than a value") }
        }
    }

    /// Checks a page's key area (`lower`, `upper`); its number of keys. Fixed-size keys (LEAF2)
    /// must fit, and be `expectedKeySize` bytes each when given (the size liblmdb reads them at).
    func keys(_ bytes: [UInt8], size: Int, leaf2: Bool, expectedKeySize: Int? = nil, page: Int, tree: String) -> Int? {
        let lower = Int(u16(bytes, 12)), upper = Int(u16(bytes, 14))
        guard lower >= Self.headerSize, lower <= upper, upper <= size, (lower - Self.headerSize) % 2 == 0 else {
            fail(page, tree, "its bounds (lower \(lower), upper \(upper)) do not fit a page of \(size) bytes")
            return nil
        }
        let count = (lower - Self.headerSize) / 2
        if leaf2 {
            let keySize = Int(u16(bytes, 8))
            if let expectedKeySize, keySize != expectedKeySize {
                fail(page, tree, "fixed keys of \(keySize) bytes where its record says \(expectedKeySize)")
                return nil
            }
            guard keySize > 0, Self.headerSize + count * keySize <= size else {
                fail(page, tree, "\(count) fixed keys of \(keySize) bytes do not fit it")
                return nil
            }
        }
        return count
    }

    struct Node {
        var flags: UInt16
        var key: Int, keySize: Int
        var data: Int, dataSize: Int
        var child: UInt64
        var overflow: UInt64
    }

    /// The node at `offset`, every part of it inside the page.
    func node(_ bytes: [UInt8], at offset: Int, limit: Int, page: Int, tree: String, leaf: Bool) -> Node? {
        let upper = Int(u16(bytes, 14))
        guard offset >= upper, offset + Self.nodeSize <= limit else {
            fail(page, tree, "a node at byte \(offset) lies outside its node area")
            return nil
        }
        let low = UInt64(u16(bytes, offset)), high = UInt64(u16(bytes, offset + 2)), flags = u16(bytes, offset + 4)
        let keySize = Int(u16(bytes, offset + 6))
        let key = offset + Self.nodeSize
        guard key + keySize <= limit else {
            fail(page, tree, "a key of \(keySize) bytes at byte \(key) runs past the page")
            return nil
        }
        if !leaf {
            return Node(flags: 0, key: key, keySize: keySize, data: key + keySize, dataSize: 0, child: low | high << 16 | UInt64(flags) << 32, overflow: 0)
        }
        let dataSize = Int(low | high << 16)
        let data = key + keySize
        let stored = flags & Self.bigData != 0 ? 8 : dataSize
        guard data + stored <= limit else {
            fail(page, tree, "a value of \(stored) bytes at byte \(data) runs past the page")
            return nil
        }
        return Node(flags: flags, key: key, keySize: keySize, data: data, dataSize: dataSize, child: 0,
                    overflow: flags & Self.bigData != 0 ? u64(bytes, data) : 0)
    }

    /// A value too big for its leaf: the run of overflow pages it names.
    func checkOverflow(_ number: UInt64, dataSize: Int, tree: String) throws(LMDBError) {
        guard number >= 2, number <= UInt64(lastPage) else { return fail(Int(clamping: number), tree, "an overflow page number beyond the file's last page, \(lastPage)") }
        let page = Int(number)
        let bytes = try read(page: page)
        guard bytes.count == pageSize else { return fail(page, tree, "the file ends inside it") }
        guard u64(bytes, 0) == number, u16(bytes, 10) & Self.overflow != 0 else { return fail(page, tree, "not the overflow page its leaf names") }
        let count = Int(u32(bytes, 12))
        guard count >= 1, page + count - 1 <= lastPage, dataSize <= count * pageSize - Self.headerSize else {
            return fail(page, tree, "an overflow run of \(count) pages does not hold its \(dataSize)-byte value within the file")
        }
        for run in page ..< page + count {
            guard visited.insert(run).inserted else { return fail(run, tree, "reached twice (an overflow run overlaps another page)") }
        }
    }

    func fail(_ page: Int, _ tree: String, _ problem: String) {
        if damage == nil { damage = PageDamage(page: page, tree: tree, problem: problem) }
    }

    /// Page `page`, as many of its bytes as the file holds.
    func read(page: Int) throws(LMDBError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: pageSize)
        var got = 0
        while got < pageSize {
            let n = bytes.withUnsafeMutableBytes { raw in pread(fd, raw.baseAddress.map { $0 + got }, pageSize - got, off_t(page * pageSize + got)) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw LMDBError(errno, "pread", "data.mdb page \(page)") }
            if n == 0 { break }
            got += n
        }
        return Array(bytes.prefix(got))
    }

    // Little-endian reads; callers check the bounds, and a short buffer reads as zeros.
    func u16(_ b: [UInt8], _ at: Int) -> UInt16 { UInt16(truncatingIfNeeded: uint(b, at, 2)) }
    func u32(_ b: [UInt8], _ at: Int) -> UInt32 { UInt32(truncatingIfNeeded: uint(b, at, 4)) }
    func u64(_ b: [UInt8], _ at: Int) -> UInt64 { uint(b, at, 8) }
    func uint(_ b: [UInt8], _ at: Int, _ count: Int) -> UInt64 {
        var value: UInt64 = 0
        for i in 0..<count where at + i >= 0 && at + i < b.count { value |= UInt64(b[at + i]) << (8 * UInt64(i)) }
        return value
    }
}
