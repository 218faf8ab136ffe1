import Glibc
@_spi(Storage) import LedgerCore

/// Reads a file, or standard input, line by line in bounded memory: one 64 KiB chunk and at
/// most `keepBytes` of the current line, however long the file or the line.
///
/// Lines end with `\n` (a `\r` before it is dropped). A line longer than `keepBytes` is
/// returned cut short, with its full `length`, so the caller can say how long it was.
/// Foundation has no streaming byte reader on Linux (`FileHandle.bytes` does not exist there).
@_spi(Storage) public struct LineReader: ~Copyable {
    /// One line of input.
    public struct Line: Sendable, Hashable {
        /// Its number, from 1.
        public let number: Int
        /// Its bytes without the line ending; cut at `keepBytes` when `length` is larger.
        public let bytes: [UInt8]
        /// Its full length in bytes, without the line ending.
        public let length: Int

        public init(number: Int, bytes: [UInt8], length: Int) {
            self.number = number
            self.bytes = bytes
            self.length = length
        }

        /// Whether `bytes` holds only the start of the line.
        public var isCut: Bool { length > bytes.count }
    }

    private let fd: Int32
    private let ownsDescriptor: Bool
    private let keepBytes: Int
    private var chunk: [UInt8]
    private var chunkStart = 0
    private var chunkEnd = 0
    private var atEnd = false
    private var number = 0
    /// The file's name, for messages (`-` is standard input).
    public let name: String

    /// Opens `path` for reading; `-` reads standard input.
    /// - Throws: `LedgerError` (`.storage`, with `file`) when it cannot be opened.
    public init(path: String, keepBytes: Int = 1 << 20) throws(LedgerError) {
        if path == "-" {
            fd = 0
            ownsDescriptor = false
        } else {
            let opened = open(path, O_RDONLY | O_CLOEXEC)
            guard opened >= 0 else {
                let reason = String(cString: strerror(errno))
                var error = LedgerError(.storage, "cannot read \(path): \(reason)")
                error.file = path
                throw error
            }
            fd = opened
            ownsDescriptor = true
        }
        name = path
        self.keepBytes = keepBytes
        chunk = [UInt8](repeating: 0, count: 64 << 10)
    }

    deinit {
        if ownsDescriptor { close(fd) }
    }

    /// The next line, or `nil` at the end of the input.
    /// - Throws: `LedgerError` (`.storage`) when the read fails.
    public mutating func next() throws(LedgerError) -> Line? {
        var kept: [UInt8] = []
        var length = 0
        var sawAnything = false
        while true {
            if chunkStart == chunkEnd {
                if atEnd { break }
                try fill()
                if chunkStart == chunkEnd { break }
            }
            sawAnything = true
            let newline = chunk[chunkStart..<chunkEnd].firstIndex(of: 0x0A)
            let stop = newline ?? chunkEnd
            let piece = stop - chunkStart
            if kept.count < keepBytes {
                let take = min(piece, keepBytes - kept.count)
                kept.append(contentsOf: chunk[chunkStart ..< chunkStart + take])
            }
            length += piece
            chunkStart = stop
            if newline != nil {
                chunkStart += 1
                return finish(kept, length)
            }
        }
        guard sawAnything else { return nil }
        return finish(kept, length)
    }

    private mutating func finish(_ kept: [UInt8], _ length: Int) -> Line {
        number += 1
        var kept = kept
        var length = length
        if length == kept.count, kept.last == 0x0D {
            kept.removeLast()
            length -= 1
        }
        return Line(number: number, bytes: kept, length: length)
    }

    private mutating func fill() throws(LedgerError) {
        let count = chunk.withUnsafeMutableBytes { buffer in
            var n: Int
            repeat { n = read(fd, buffer.baseAddress, buffer.count) } while n < 0 && errno == EINTR
            return n
        }
        guard count >= 0 else {
            var error = LedgerError(.storage, "cannot read \(name): \(String(cString: strerror(errno)))")
            error.file = name
            throw error
        }
        chunkStart = 0
        chunkEnd = count
        if count == 0 { atEnd = true }
    }
}
