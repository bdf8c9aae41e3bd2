/// The name a misspelt one was meant to be: for job-file fields and command-line options
/// alike ("did you mean 'after'?", "did you mean --budget?").
public enum Spelling {
    /// The known name a misspelt one was most likely meant to be: the same name in another
    /// case or spelling (`max_runtime`, `maxRuntime`), a common synonym (`depends_on` for
    /// `after`), or one at most two edits away.
    public static func closest(to typo: String, among known: [String], synonyms: [String: String] = [:]) -> String? {
        let folded = fold(typo)
        if let same = known.first(where: { fold($0) == folded }) { return same }
        if let meant = synonyms[folded], known.contains(meant) { return meant }
        let lowered = typo.lowercased()
        let best = known.map { ($0, distance(lowered, $0.lowercased())) }.min { $0.1 < $1.1 }
        guard let best else { return nil }
        let allowed = best.0.count <= 3 ? 1 : 2
        return best.1 <= allowed ? best.0 : nil
    }

    /// Lower case without `-` and `_`: `max_runtime`, `maxRuntime` and `max-runtime` meet.
    static func fold(_ name: String) -> String {
        String(name.lowercased().filter { $0 != "-" && $0 != "_" })
    }

    /// Edit distance counting a swap of two neighbours as one edit (`trian` → `train`).
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
    }
}
