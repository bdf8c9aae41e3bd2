/// Terminal columns taken by text, and cutting text to a number of columns without
/// splitting a character. Pure: the renderer's measure of everything it lays out.
///
/// A character is a grapheme cluster (`Character`), so a combining accent or an emoji
/// sequence is never split. Wide (East Asian, emoji) characters take two columns; marks,
/// joiners and other zero-width scalars take none.
enum TextWidth {
    /// The columns one character takes: 0, 1 or 2.
    static func columns(_ character: Character) -> Int {
        var scalars = character.unicodeScalars.makeIterator()
        guard let first = scalars.next() else { return 0 }
        let base = columns(first)
        // An emoji presentation selector (U+FE0F) makes a text-style symbol two wide.
        if base == 1, character.unicodeScalars.contains(where: { $0.value == 0xFE0F }) { return 2 }
        return base
    }

    /// The columns a single scalar takes when it starts a character.
    static func columns(_ scalar: Unicode.Scalar) -> Int {
        let v = scalar.value
        if v < 0x20 || (v >= 0x7F && v < 0xA0) { return 0 }
        if v < 0x300 { return 1 }
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format, .control:
            return 0
        default:
            break
        }
        if v == 0x200B { return 0 }
        if isWide(v) || scalar.properties.isEmojiPresentation { return 2 }
        return 1
    }

    /// East Asian Wide and Fullwidth ranges (Unicode 15, condensed).
    private static func isWide(_ v: UInt32) -> Bool {
        switch v {
        case 0x1100...0x115F, 0x231A...0x231B, 0x2329...0x232A, 0x23E9...0x23EC, 0x23F0, 0x23F3,
             0x25FD...0x25FE, 0x2614...0x2615, 0x2648...0x2653, 0x267F, 0x2693, 0x26A1,
             0x26AA...0x26AB, 0x26BD...0x26BE, 0x26C4...0x26C5, 0x26CE, 0x26D4, 0x26EA,
             0x26F2...0x26F3, 0x26F5, 0x26FA, 0x26FD, 0x2705, 0x270A...0x270B, 0x2728, 0x274C,
             0x274E, 0x2753...0x2755, 0x2757, 0x2795...0x2797, 0x27B0, 0x27BF, 0x2B1B...0x2B1C,
             0x2B50, 0x2B55, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF,
             0xA000...0xA4CF, 0xA960...0xA97F, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE10...0xFE19,
             0xFE30...0xFE6F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x16FE0...0x16FE4, 0x17000...0x18CFF,
             0x1B000...0x1B2FF, 0x1F004, 0x1F0CF, 0x1F18E, 0x1F191...0x1F19A, 0x1F200...0x1F251,
             0x1F300...0x1F64F, 0x1F680...0x1F6FF, 0x1F7E0...0x1F7EB, 0x1F90C...0x1F9FF,
             0x1FA70...0x1FAFF, 0x20000...0x2FFFD, 0x30000...0x3FFFD:
            return true
        default:
            return false
        }
    }

    /// The columns `text` takes (it should hold no control characters: see `sanitize`).
    static func columns(_ text: String) -> Int {
        var total = 0
        for character in text { total += columns(character) }
        return total
    }

    /// Text from a task (a title, a detail, a line of output shown in place) made safe to
    /// put on one row: control characters (escape sequences included) and line breaks
    /// become spaces, so nothing a task sends can move the cursor or colour the screen.
    static func sanitize(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            result.append(isControl(scalar) ? " " : scalar)
        }
        return String(result)
    }

    /// A C0 or C1 control character or DEL: what `sanitize` replaces.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (scalar.value >= 0x7F && scalar.value < 0xA0)
    }

    /// `text` cut to at most `width` columns; when cut, it ends in `ellipsis` (which counts
    /// within the width). A wide character that would straddle the limit is left out whole.
    static func truncate(_ text: String, to width: Int, ellipsis: String = "…") -> String {
        guard width > 0 else { return "" }
        if columns(text) <= width { return text }
        let ellipsisWidth = columns(ellipsis)
        guard ellipsisWidth <= width else { return take(ellipsis, width) }
        return take(text, width - ellipsisWidth) + ellipsis
    }

    /// The longest prefix of `text` that fits in `width` columns.
    static func take(_ text: String, _ width: Int) -> String {
        var used = 0
        var end = text.startIndex
        for index in text.indices {
            let w = columns(text[index])
            if used + w > width { break }
            used += w
            end = text.index(after: index)
        }
        return String(text[..<end])
    }

    /// `text` padded with spaces to exactly `width` columns (on the left when
    /// `alignRight`); longer text is truncated.
    static func pad(_ text: String, to width: Int, alignRight: Bool = false) -> String {
        let cut = truncate(text, to: width)
        let gap = max(0, width - columns(cut))
        let spaces = String(repeating: " ", count: gap)
        return alignRight ? spaces + cut : cut + spaces
    }
}
