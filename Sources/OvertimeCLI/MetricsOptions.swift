import Overtime

/// `--metrics ADDR:PORT` and `--metrics-file PATH`, the same on `run` and `batch`
/// (docs/metrics.md).
struct MetricsOptions {
    var address: MetricsAddress?
    var file: String?

    static let names = ["--metrics", "--metrics-file"]

    static let help = """
    Metrics (Prometheus; docs/metrics.md):
      --metrics ADDR:PORT  serve /metrics over HTTP: PORT or :PORT listens on 127.0.0.1
                           only; an address (0.0.0.0, ::, an IP of this machine) is used as
                           given; port 0 takes any free one. The address is said on stderr
      --metrics-file PATH  write the same page to PATH (a file of yours: a temporary file,
                           then rename; a symlink, FIFO or device: written through) every
                           5s and once at the end, for node_exporter's textfile collector
    """

    /// Takes `option` if it is one of these. - Returns: false when it is not.
    mutating func parse(_ option: String, command: String, value: () throws(UsageError) -> String) throws(UsageError) -> Bool {
        switch option {
        case "--metrics":
            let text = try value()
            do throws(MetricsAddressError) {
                address = try MetricsAddress.parse(text)
            } catch {
                throw UsageError(message: "\(command): --metrics: \(error.message)")
            }
        case "--metrics-file":
            let path = try value()
            guard !path.isEmpty else { throw UsageError(message: "\(command): --metrics-file needs a file") }
            file = path
        default:
            return false
        }
        return true
    }

    var settings: MetricsSettings? {
        address == nil && file == nil ? nil : MetricsSettings(address: address, file: file, version: OvertimeCommand.version)
    }
}
