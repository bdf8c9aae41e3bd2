/// Where `--metrics` listens: `PORT` or `:PORT` (loopback, 127.0.0.1), `ADDR:PORT`,
/// `[IPV6]:PORT`. Port 0 asks the system for a free one.
public struct MetricsAddress: Sendable, Equatable, CustomStringConvertible {
    /// A numeric address (checked when it is bound); `localhost` is read as 127.0.0.1.
    public var host: String
    public var port: Int

    public static let loopback = "127.0.0.1"

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `127.0.0.1:9464`, `[::]:9464`.
    public var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// - Throws: `MetricsAddressError` saying what is wrong and what would be right.
    public static func parse(_ text: String) throws(MetricsAddressError) -> MetricsAddress {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw .malformedIPv6(text)
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            guard !host.contains(":") else {
                throw .malformedIPv6(text)
            }
        } else {
            host = ""
            portText = text[...]
        }
        guard let port = Int(portText), (0...65535).contains(port), portText.allSatisfy(\.isASCII) else {
            throw .badPort(text)
        }
        let address = host.isEmpty || host == "localhost" ? loopback : String(host)
        return MetricsAddress(host: address, port: port)
    }
}

/// Why a text is not a `--metrics` address. Each case keeps the text as given, which its
/// message quotes.
public enum MetricsAddressError: Error, Sendable, Equatable, CustomStringConvertible {
    /// An IPv6 address not written `[ADDR]:PORT` (no brackets, or no port after them).
    case malformedIPv6(String)
    /// No port, or one that is not a number from 0 to 65535.
    case badPort(String)

    /// What is wrong and what would be right.
    public var message: String {
        switch self {
        case let .malformedIPv6(text): "'\(text)': an IPv6 address is written [ADDR]:PORT, as [::1]:9464"
        case let .badPort(text):
            "'\(text)': expected PORT, :PORT or ADDR:PORT with a port from 0 to 65535 (0: any free one), as 9464 or 0.0.0.0:9464"
        }
    }

    public var description: String { message }
}
