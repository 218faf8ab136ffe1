@_spi(Storage) import LedgerCore
import LedgerModels

/// One build of every fold (the facts and each model): which generation of `models` holds
/// its states, the policy it was built under, and per fold its tag (the byte after each key
/// that marks the fold's states), the version that built it and its checkpoint (the last
/// position its states hold; positions are gap-free, so that alone says which events they
/// hold). All folds are built together, so one subject's states are neighbours.
struct Generation: StateRecord, Equatable, Sendable {
    struct FoldRecord: StateRecord, Equatable, Sendable {
        var name = ""
        var tag: UInt64 = 0
        var version: UInt64 = 0
        var checkpoint: UInt64 = 0

        init() {}
        init(name: String, tag: UInt8, version: UInt32, checkpoint: UInt64) {
            (self.name, self.tag, self.version, self.checkpoint) = (name, UInt64(tag), UInt64(version), checkpoint)
        }
        mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&name)
            try coder.code(&tag)
            try coder.code(&version)
            try coder.code(&checkpoint)
            guard tag < UInt64(ModelSchema.itemMark) else {
                throw StateDecoder.Damaged(what: "fold \(name)'s tag \(tag) is not below \(ModelSchema.itemMark), where items' marks begin")
            }
        }

        /// The byte after each key that marks this fold's states (checked when decoded).
        var tagByte: UInt8 { UInt8(truncatingIfNeeded: tag) }
    }

    var id: UInt64 = 0
    var policyHash = ""
    var folds: [FoldRecord] = []

    init() {}
    mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
        try coder.code(&id)
        try coder.code(&policyHash)
        try coder.code(&folds)
    }

    var number: UInt32 { UInt32(truncatingIfNeeded: id) }

    func record(_ name: String) -> FoldRecord? { folds.first { $0.name == name } }

}
