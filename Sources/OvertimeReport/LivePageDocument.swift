/// The live page (`--ui`): `Page/live.html` with `page.css`, `live.css`, `common.js` and
/// `live.js` inline, made into `LivePageText` at build time (the PageBundle plugin). Its
/// data is not in it: the page asks the supervisor's API for it (docs/control.md). Each
/// response carries a nonce of its own, which the page's Content-Security-Policy names as
/// the only inline style and script it may run.
public enum LivePageDocument {
    /// The whole page, its `<style>` and `<script>` carrying `nonce` (hexadecimal: nothing
    /// to escape in an attribute).
    public static func html(nonce: String) -> [UInt8] {
        var page: [UInt8] = []
        page.reserveCapacity(LivePageText.pieces.reduce(0) { $0 + $1.utf8.count } + 2 * nonce.utf8.count)
        for (index, piece) in LivePageText.pieces.enumerated() {
            if index > 0 { page += nonce.utf8 }
            page += piece.utf8
        }
        return page
    }
}
