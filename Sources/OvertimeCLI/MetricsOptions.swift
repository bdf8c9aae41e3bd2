import Overtime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `--metrics ADDR:PORT`, `--metrics-file PATH` and `--ui [ADDR:]PORT` (the live page, served
/// by the same kind of HTTP server), the same on `run` and `batch` (docs/metrics.md, docs/ui.md).
struct MetricsOptions {
    var address: MetricsAddress?
    var file: String?
    /// `--ui`, or `OVERTIME_UI` (`readEnvironment`).
    var livePage: MetricsAddress?

    static let names = ["--metrics", "--metrics-file", "--ui"]

    static let help = """
    Metrics (Prometheus; docs/metrics.md):
      --metrics ADDR:PORT  serve /metrics over HTTP: PORT or :PORT listens on 127.0.0.1
                           only; an address (0.0.0.0, ::, an IP of this machine) is used as
                           given; port 0 takes any free one. The address is said on stderr
      --metrics-file PATH  write the same page to PATH (a file of yours: a temporary file,
                           then rename; a symlink, FIFO or device: written through) every
                           5s and once at the end, for node_exporter's textfile collector

    Live page (docs/ui.md):
      --ui [ADDR:]PORT     serve a live page of the tasks, with Extend, Revoke and Cancel,
                           and its JSON API (docs/control.md); addresses as --metrics. Its
                           URL, with the token it needs, is said on stderr, shown by
                           'overtime ctl list' and, for a batch, written to RUN_DIR/ui-url.
                           Also OVERTIME_UI
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
        case "--ui":
            livePage = try Self.parseLivePage(try value(), source: "\(command): --ui")
        case "--metrics-file":
            let path = try value()
            guard !path.isEmpty else { throw UsageError(message: "\(command): --metrics-file needs a file") }
            file = path
        default:
            return false
        }
        return true
    }

    /// `OVERTIME_UI` where `--ui` was not given; taken out of the environment either way, so
    /// that no task inherits it: an `overtime` a task runs (a step of the srun executor, a
    /// nested run) would otherwise serve a page of its own, on the same port.
    /// Called while parsing, before any thread runs. - Throws: `UsageError` for a bad address.
    mutating func readEnvironment(command: String) throws(UsageError) {
        guard let value = getenv("OVERTIME_UI") else { return }
        let text = String(cString: value)
        unsetenv("OVERTIME_UI")
        guard livePage == nil, !text.isEmpty else { return }
        livePage = try Self.parseLivePage(text, source: "\(command): OVERTIME_UI")
    }

    private static func parseLivePage(_ text: String, source: String) throws(UsageError) -> MetricsAddress {
        do throws(MetricsAddressError) {
            return try MetricsAddress.parse(text)
        } catch {
            throw UsageError(message: "\(source): \(error.message)")
        }
    }

    var settings: MetricsSettings? {
        address == nil && file == nil ? nil : MetricsSettings(address: address, file: file, version: OvertimeCommand.version)
    }
}

/// The live page's URL, said once at start on stderr in every progress mode: the one line a
/// user copies into a browser (it holds the token; it is never logged elsewhere).
enum LivePageURL {
    @Sendable static func say(_ url: String) {
        Terminal.error("overtime: live page: \(url)")
    }
}
