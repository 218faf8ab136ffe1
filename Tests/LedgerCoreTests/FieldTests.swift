import Testing

@_spi(Storage) @testable import LedgerCore

@Suite struct FieldTests {
    /// Every field of every layout is read straight into its stored property. A key path
    /// through a protocol requirement (a shared shape's, say) would be applied at run time for
    /// every field of every event a rebuild reads, several times the cost of the read itself.
    @Test func everyFieldOfEveryLayoutIsReadInPlace() {
        func slowFields<T: PayloadLayout>(_: T.Type) -> [String] {
            T.fields.filter { !$0.readsInPlace }.map { "\(T.type) v\(T.schemaVersion): \($0.name)" }
        }
        let layouts: [any PayloadLayout.Type] = EventCatalog.payloadTypes + EventCatalog.legacyTypes
        #expect(layouts.flatMap { slowFields($0) } == [])
    }
}
