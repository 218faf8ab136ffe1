import Glibc

/// A thread that runs `body` once and that `join()` waits for: a node's fold loops and its
/// lease keeper, stopped and joined when the node stops.
final class JoinableThread: @unchecked Sendable {
    private var handle = pthread_t()
    private var started = false

    /// Starts `body` on a new thread. When the system refuses one, `body` runs here and now
    /// if `inlineIfRefused` (work that ends by itself), and not at all otherwise (`started`
    /// says so).
    init(inlineIfRefused: Bool = false, _ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Body(body))
        started = pthread_create(&handle, nil, { argument in
            guard let argument else { return nil }
            Unmanaged<Body>.fromOpaque(argument).takeRetainedValue().run()
            return nil
        }, box.toOpaque()) == 0
        if !started {
            box.release()
            if inlineIfRefused { body() }
        }
    }

    /// Whether the thread was started (and not yet joined).
    var isStarted: Bool { started }

    func join() {
        guard started else { return }
        started = false
        pthread_join(handle, nil)
    }

    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }
}

/// Sleeps `milliseconds`.
func pause(milliseconds: Int) {
    var request = timespec(tv_sec: milliseconds / 1000, tv_nsec: (milliseconds % 1000) * 1_000_000)
    var left = timespec()
    while nanosleep(&request, &left) != 0 && errno == EINTR { request = left }
}

/// Sleeps up to `milliseconds`, in steps of 50 ms, and no longer once `going` is false: the
/// wait of a loop that a stopping node (or claim) cuts short.
func pause(milliseconds: Int, while going: () -> Bool) {
    var slept = 0
    while slept < milliseconds && going() {
        pause(milliseconds: 50)
        slept += 50
    }
}
