import Crypto
@_spi(Storage) import LedgerCore

/// How a cluster lays the ledger out on NATS: one JetStream stream, each customer one NATS
/// subject `ledger.<partition>.<token>`, each partition answered by the node that holds it.
///
/// The number of partitions is fixed when the cluster is created (it is kept in the cluster's
/// key-value bucket); a subject's partition never changes.
package struct ClusterLayout: Sendable, Hashable {
    /// The stream that is the cluster's log of record.
    package static let stream = "LEDGER"
    /// The key-value bucket of the cluster's settings (its partition count, its policy).
    package static let settingsBucket = "ledger-cluster"
    /// The key-value bucket of the partition leases.
    package static let leasesBucket = "ledger-leases"
    /// The key-value bucket where live nodes keep a heartbeat.
    package static let nodesBucket = "ledger-nodes"
    /// The default number of partitions.
    package static let defaultPartitions = 64

    /// How many partitions the subjects are spread over.
    package let partitions: Int

    package init(partitions: Int) {
        self.partitions = max(1, partitions)
    }

    /// `subject`'s partition: the first 8 bytes of SHA-256 of its UTF-8 bytes, big-endian,
    /// modulo the partition count. Stable across machines, processes and versions.
    package func partition(of subject: String) -> Int {
        let digest = SHA256.hash(data: Array(subject.utf8))
        let prefix = digest.withUnsafeBytes { $0.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
        return Int(prefix % UInt64(partitions))
    }

    /// The NATS subject of a ledger subject's events.
    package func natsSubject(of subject: String) -> String {
        "ledger.\(partition(of: subject)).\(Self.token(of: subject))"
    }

    /// The filter subject of one partition's events.
    package static func filter(partition: Int) -> String { "ledger.\(partition).*" }

    /// The subject a node answers one partition's requests on (`what`: append, status…).
    package static func service(partition: Int, _ what: String) -> String { "ledger.svc.\(partition).\(what)" }

    /// The subject a node answers requests for it as a whole on (a rebuild's steps).
    package static func nodeService(_ name: String) -> String { "ledger.svc.node.\(token(of: name))" }

    /// The key, in the settings bucket, of the last rebuild over the cluster that committed:
    /// `{"id": …, "policy": …}`, the policy being the one every node folds under (`null`: each
    /// store's own). In the leases bucket, the same key is the claim of the rebuild under way,
    /// which its coordinator renews while it runs (its value the rebuild's id).
    package static let rebuildKey = "rebuild"

    /// A ledger subject as one NATS token: ASCII letters, digits, `-` and `_` stay; every other
    /// byte of its UTF-8 becomes `~` and two upper-case hex digits (`appstore:1` →
    /// `appstore~3A1`). NATS tokens may not hold `.`, `*`, `>` or white space; this keeps them
    /// readable too.
    package static func token(of subject: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(subject.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in subject.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "~"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The ledger subject of a token `token(of:)` made; `nil` for anything else.
    package static func subject(ofToken encoded: String) -> String? {
        var out: [UInt8] = []
        var bytes = encoded.utf8.makeIterator()
        func nibble(_ b: UInt8?) -> UInt8? {
            switch b {
            case let b? where b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9"): b - UInt8(ascii: "0")
            case let b? where b >= UInt8(ascii: "A") && b <= UInt8(ascii: "F"): b - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        while let byte = bytes.next() {
            if byte == UInt8(ascii: "~") {
                guard let high = nibble(bytes.next()), let low = nibble(bytes.next()) else { return nil }
                out.append(high << 4 | low)
            } else {
                out.append(byte)
            }
        }
        // Only the one spelling `token(of:)` makes: valid UTF-8, nothing escaped that needs no escape.
        guard !out.isEmpty, let subject = String(validating: out, as: UTF8.self), token(of: subject) == encoded else { return nil }
        return subject
    }

    /// The ledger subject and partition of a message's NATS subject; `nil` when it is not one
    /// of the ledger's.
    package func parse(natsSubject: String) -> (partition: Int, subject: String)? {
        let parts = natsSubject.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "ledger", let partition = Int(parts[1]), partition >= 0, partition < partitions,
              let subject = Self.subject(ofToken: String(parts[2])), self.partition(of: subject) == partition
        else { return nil }
        return (partition, subject)
    }
}
