/// The last `StateEncoder.window` distinct strings written or read, as a ring: slot 0, the
/// latest, is at `newest`, a slot further back one place before it. A new string replaces the
/// oldest in place, where an array kept latest first moved all of them.
struct RecentStrings: Sendable {
    private var strings: [String] = []
    private var newest = 0

    /// The slot of `value`, if it is among them.
    func slot(of value: String) -> Int? {
        strings.indices.first { strings[index(ofSlot: $0)] == value }
    }

    /// The string in `slot`, if there is one.
    func string(at slot: Int) -> String? {
        slot < strings.count ? strings[index(ofSlot: slot)] : nil
    }

    mutating func add(_ value: String) {
        if strings.count < StateEncoder.window {
            if strings.isEmpty { strings.reserveCapacity(StateEncoder.window) }
            strings.append(value)
            newest = strings.count - 1
        } else {
            newest = (newest + 1) % StateEncoder.window
            strings[newest] = value
        }
    }

    private func index(ofSlot slot: Int) -> Int { (newest - slot + strings.count) % strings.count }
}
