/// A tiny deterministic generator for the fuzz tests (a 64-bit LCG, top bits): the same
/// seed gives the same inputs, so a failure repeats.
struct TestDice {
    var state: UInt64

    /// A number in 0..<bound.
    mutating func roll(_ bound: Int) -> Int {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return Int((state >> 33) % UInt64(bound))
    }
}
