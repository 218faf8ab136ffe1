import PropertyBased
import Testing

// `propertyCheck` runs its body in an issue-handling scope that drops what the body throws
// (swift-property-based 1.x with Swift 6.2 and later: `try? await handler.provideScope`), so
// a property whose body throws passed, whatever it threw. These run the same check with the
// body's error recorded as an issue of the case that threw it, which fails the test (and lets
// the library shrink the input, as it does for a failed expectation).

/// `propertyCheck` with one generator, failing the test on an error the body throws.
public func checkProperty<In, Out>(
    count: Int = 100,
    input: Generator<Out, some Sequence<In>>,
    perform body: (Out) async throws -> Void,
    isolation: isolated (any Actor)? = #isolation,
    sourceLocation: SourceLocation = #_sourceLocation
) async {
    await propertyCheck(count: count, input: input, perform: { value in
        do { try await body(value) } catch { Issue.record(error, "the property threw for \(value)", sourceLocation: sourceLocation) }
    }, isolation: isolation, sourceLocation: sourceLocation)
}

/// `propertyCheck` with two generators, failing the test on an error the body throws.
public func checkProperty<InA, InB, OutA, OutB>(
    count: Int = 100,
    input g0: Generator<OutA, some Sequence<InA>>,
    _ g1: Generator<OutB, some Sequence<InB>>,
    perform body: (OutA, OutB) async throws -> Void,
    isolation: isolated (any Actor)? = #isolation,
    sourceLocation: SourceLocation = #_sourceLocation
) async {
    await checkProperty(count: count, input: zip(g0, g1), perform: { try await body($0.0, $0.1) }, isolation: isolation, sourceLocation: sourceLocation)
}

/// `propertyCheck` with three generators, failing the test on an error the body throws.
public func checkProperty<InA, InB, InC, OutA, OutB, OutC>(
    count: Int = 100,
    input g0: Generator<OutA, some Sequence<InA>>,
    _ g1: Generator<OutB, some Sequence<InB>>,
    _ g2: Generator<OutC, some Sequence<InC>>,
    perform body: (OutA, OutB, OutC) async throws -> Void,
    isolation: isolated (any Actor)? = #isolation,
    sourceLocation: SourceLocation = #_sourceLocation
) async {
    await checkProperty(count: count, input: zip(g0, g1, g2), perform: { try await body($0.0, $0.1, $0.2) }, isolation: isolation, sourceLocation: sourceLocation)
}
