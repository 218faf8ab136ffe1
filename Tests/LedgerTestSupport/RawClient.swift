import Foundation
import Glibc

/// A TCP client of 127.0.0.1 that sends and reads bytes as they are, with timeouts.
public final class RawClient {
    private var socket: Int32

    /// Connected to `port`, with a receive buffer of `receiveBuffer` bytes when given (the
    /// kernel's own otherwise).
    public init?(port: Int, receiveBuffer: Int32? = nil) {
        socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return nil }
        if var size = receiveBuffer {
            _ = setsockopt(socket, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            Glibc.close(socket)
            return nil
        }
    }

    public func send(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// What arrives within `seconds` of the first wait (stopping at the first pause after
    /// some bytes came), `""` when nothing does.
    public func read(seconds: Double) -> String {
        let (text, _) = receive(seconds: seconds, untilClosed: false)
        return text
    }

    /// The first bytes to arrive within `seconds` (one read of at most 4 KiB), `""` when none do.
    public func readFirst(seconds: Double) -> String {
        var poller = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(seconds * 1000)) > 0 else { return "" }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
        return count > 0 ? String(decoding: buffer[0 ..< count], as: UTF8.self) : ""
    }

    /// Reads until `count` bytes came, the server closed the connection, or `seconds` passed:
    /// how many came, and whether it closed.
    public func readSteadily(_ count: Int, seconds: Double) -> (Int, Bool) {
        var received = 0
        let deadline = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: count)
        while received < count && Date() < deadline {
            var poller = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(max(1, deadline.timeIntervalSinceNow * 1000))) > 0 else { continue }
            let got = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, count - received, 0) }
            if got <= 0 { return (received, true) }
            received += got
        }
        return (received, false)
    }

    /// What arrives until the server closes the connection, and whether it did within `seconds`.
    public func readUntilClosed(seconds: Double) -> (String, Bool) {
        receive(seconds: seconds, untilClosed: true)
    }

    private func receive(seconds: Double, untilClosed: Bool) -> (String, Bool) {
        var received: [UInt8] = []
        let deadline = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date() < deadline {
            var poller = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let waitMs = received.isEmpty || untilClosed ? Int32(max(1, deadline.timeIntervalSinceNow * 1000)) : 200
            guard poll(&poller, 1, waitMs) > 0 else {
                if !received.isEmpty && !untilClosed { break }
                continue
            }
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return (String(decoding: received, as: UTF8.self), true) }
            received += buffer[0 ..< count]
        }
        return (String(decoding: received, as: UTF8.self), false)
    }

    public func close() {
        guard socket >= 0 else { return }
        Glibc.close(socket)
        socket = -1
    }

    deinit { close() }
}
