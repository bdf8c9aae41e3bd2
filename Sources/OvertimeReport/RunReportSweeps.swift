import OvertimeProtocol

/// A sweep's or array's element as the journal names it: `train[lr=0.01,seed=1]`,
/// `shard[7]`. A task's own name holds no bracket (a name is letters, digits, `-`, `_` and
/// `.`), so a name that ends in `[…]` after a plain stem is an element's.
struct SweepElementName {
    var sweep: String
    /// What its name holds between the brackets.
    var label: Substring

    init?(_ name: String) {
        guard name.utf8.last == UInt8(ascii: "]"), let open = name.firstIndex(of: "["), open > name.startIndex else { return nil }
        let stem = name[..<open]
        guard stem.unicodeScalars.allSatisfy({ Self.isKeyScalar($0) || $0 == "." }) else { return nil }
        sweep = String(stem)
        label = name[name.index(after: open)..<name.index(before: name.endIndex)]
    }

    /// An array's element is named by its index; a matrix's by `key=value` pairs.
    var kind: RunReport.Group.Kind {
        label.contains("=") ? .matrix : .array
    }

    /// Its parameters: `index` for an array's element, else the label's `key=value` pairs.
    /// A value may hold a comma (`opt=a,b`): a pair ends only at a comma that a key and `=`
    /// follow, a key being what a matrix key may be (letters, digits, `_`, `-`). At most
    /// `RunReport.fieldLimit` pairs: a journal is anyone's file.
    func parameters(as kind: RunReport.Group.Kind) -> [RunReport.Parameter] {
        guard kind == .matrix else { return [.init(key: "index", value: RunReport.shown(String(label)))] }
        var pairs: [RunReport.Parameter] = []
        var start = label.startIndex
        var i = label.startIndex
        func take(_ piece: Substring) {
            guard pairs.count < RunReport.fieldLimit else { return }
            guard let equals = piece.firstIndex(of: "="), equals > piece.startIndex else {
                // Text before any key: kept, under no key, with the pair before it.
                if let last = pairs.indices.last { pairs[last].value += "," + piece } else { pairs.append(.init(key: "", value: String(piece))) }
                return
            }
            pairs.append(.init(key: RunReport.shown(String(piece[..<equals])),
                               value: RunReport.shown(String(piece[piece.index(after: equals)...]))))
        }
        while i < label.endIndex {
            let next = label.index(after: i)
            if label[i] == ",", Self.startsWithKey(label[next...]) {
                take(label[start..<i])
                start = next
            }
            i = next
        }
        take(label[start...])
        return pairs
    }

    /// What a matrix key is made of (and a task's name, with `.`): ASCII letters, digits, `_`, `-`.
    private static func isKeyScalar(_ scalar: Unicode.Scalar) -> Bool {
        scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "_" || scalar == "-")
    }

    private static func startsWithKey(_ text: Substring) -> Bool {
        var sawKey = false
        for scalar in text.unicodeScalars {
            if scalar == "=" { return sawKey }
            guard isKeyScalar(scalar) else { return false }
            sawKey = true
        }
        return false
    }
}

extension RunReport.ResultField {
    /// The fields of a result the page compares elements by: an object's members (its
    /// first `RunReport.fieldLimit`), or a scalar result as the one field `result`.
    /// Texts are cut as every text is; a nested value is kept as its compact JSON text.
    static func fields(of result: JSONValue) -> [RunReport.ResultField] {
        switch result {
        case let .object(members):
            var fields: [RunReport.ResultField] = []
            for member in members where fields.count < RunReport.fieldLimit {
                let key = RunReport.shown(member.key)
                // A key given twice: the last one stands, as a JSON reader takes it.
                fields.removeAll { $0.key == key }
                fields.append(.init(key: key, value: shown(member.value)))
            }
            return fields
        case .array:
            return []
        default:
            return [.init(key: "result", value: shown(result))]
        }
    }

    private static func shown(_ value: JSONValue) -> JSONValue {
        switch value {
        case .null, .bool: value
        case let .number(n): n.isFinite ? value : .string(n.description)
        case let .string(text): .string(RunReport.shown(text))
        case .array, .object: .string(RunReport.shown(value.jsonText))
        }
    }
}
