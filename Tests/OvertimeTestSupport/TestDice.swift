/// A tiny deterministic generator for the fuzz tests (a 64-bit LCG, top bits): the same
/// seed gives the same inputs, so a failure repeats.
public struct TestDice {
    public var state: UInt64

    public init(state: UInt64) {
        self.state = state
    }

    /// A number in 0..<bound.
    public mutating func roll(_ bound: Int) -> Int {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return Int((state >> 33) % UInt64(bound))
    }
}
