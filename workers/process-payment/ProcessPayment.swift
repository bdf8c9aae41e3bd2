// process-payment: the seed's ProcessPaymentIntent as a program Overtime runs. It
// initiates, authorizes and processes a payment with fractional progress. If Overtime
// cancels it for `timeout` it rolls the transaction back; if a user cancels it, it cancels
// the transaction. Everything it does is appended to a ledger file, one line each.
//
//   overtime run --budget 5s -- process-payment --ledger ledger.txt [--amount 42.50]
//       [--method creditCard|debitCard] [--step-ms MS] [--extend SECONDS]
import OvertimeWorker
#if canImport(Glibc)
import Glibc
#endif

enum PaymentMethod: String {
    case creditCard, debitCard
}

/// Appends lines to the ledger file (O_APPEND: whole lines, even from two threads).
struct Ledger: Sendable {
    let path: String

    func record(_ line: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}

/// A stand-in for a payment provider: each call takes `step` and is recorded.
struct PaymentService: Sendable {
    let ledger: Ledger
    let step: Duration

    func initiateTransaction(_ id: String, amount: String) async throws {
        try await Task.sleep(for: step)
        ledger.record("initiate \(id) \(amount)")
    }

    func authorize(_ id: String, method: PaymentMethod) async throws {
        try await Task.sleep(for: step)
        ledger.record("authorize \(id) \(method.rawValue)")
    }

    func process(_ id: String) async throws {
        try await Task.sleep(for: step)
        ledger.record("process \(id)")
    }

    func rollback(_ id: String, reason: String) {
        ledger.record("rollback \(id) \(reason)")
    }

    func cancel(_ id: String, reason: String) {
        ledger.record("cancel \(id) \(reason)")
    }
}

/// Prints to stderr with write(2): no shared C stream to race on.
func complain(_ text: String) {
    let bytes = Array((text + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

@main
struct ProcessPayment {
    static func main() async {
        var ledgerPath = "ledger.txt"
        var amount = "42.50"
        var method = PaymentMethod.creditCard
        var step = Duration.milliseconds(500)
        var extendBy: Double?
        var args = CommandLine.arguments.dropFirst()
        while let arg = args.popFirst() {
            switch arg {
            case "--ledger": ledgerPath = args.popFirst() ?? ledgerPath
            case "--amount": amount = args.popFirst() ?? amount
            case "--method": method = args.popFirst().flatMap(PaymentMethod.init) ?? method
            case "--step-ms": step = .milliseconds(args.popFirst().flatMap(Int.init) ?? 500)
            case "--extend": extendBy = args.popFirst().flatMap(Double.init)
            default:
                complain("usage: process-payment --ledger PATH [--amount A] [--method creditCard|debitCard] [--step-ms MS] [--extend S]")
                exit(2)
            }
        }
        let ledger = Ledger(path: ledgerPath)
        let service = PaymentService(ledger: ledger, step: step)
        let transactionID = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let (paymentAmount, paymentMethod) = (amount, method)
        Worker.onExpiring { _ in ledger.record("expiring \(transactionID)") }

        if let extendBy {
            let budget = await Worker.requestExtension(seconds: extendBy, why: "slow payment provider")
            ledger.record("extension \(transactionID) granted=\(budget.granted)")
        }

        do {
            let message = try await withIntentCancellationHandler {
                updateProgress(fractionCompleted: 0.0, message: "Initiating payment...")
                try await service.initiateTransaction(transactionID, amount: paymentAmount)
                updateProgress(fractionCompleted: 0.3, message: "Authorizing payment...")
                try await service.authorize(transactionID, method: paymentMethod)
                updateProgress(fractionCompleted: 0.7, message: "Processing payment...")
                try await service.process(transactionID)
                updateProgress(fractionCompleted: 1.0, message: "Payment complete")
                ledger.record("complete \(transactionID)")
                return "Payment of \(paymentAmount) processed successfully"
            } onCancel: { reason in
                switch reason {
                case .timeout:
                    service.rollback(transactionID, reason: "timeout")
                case .userCancelled:
                    service.cancel(transactionID, reason: "user_cancelled")
                default:
                    service.cancel(transactionID, reason: reason.wireName)
                }
            }
            Worker.result(.string(message))
            print(message)
        } catch {
            complain("process-payment: \(transactionID) stopped (\(Worker.cancellation?.description ?? "\(error)"))")
            exit(1)
        }
    }
}
