import LedgerProjections

/// How many devices a customer used, and the latest.
public enum DevicesModel: ReadModel {
    public static let name = "devices"
    public static let version: UInt32 = 1
    public static let reads: Set<String> = [SessionStarted.type]

    public struct State: ModelState {
        public var devices: [Dated<String>] = []
        public init() {}
        public mutating func code(_ coder: inout StateCoder) throws(StateDecoder.Damaged) {
            try coder.code(&devices)
        }
    }

    public struct View: ModelView {
        public var count: Int64
        public var latest: String?
    }

    public static func apply(_ event: RecordedEvent, to state: inout State) {
        guard case .sessionStarted(let session) = event.data else { return }
        state.devices.insertDated(Dated(at: event.occurredAt, position: event.position, value: session.deviceId))
    }

    public static func view(of state: State, facts: SubjectFacts, at t: Timestamp, policy: Policy) -> View? {
        let seen = state.devices.known(at: t)
        return View(count: Int64(Set(seen.map(\.value)).count), latest: seen.last?.value)
    }
}
