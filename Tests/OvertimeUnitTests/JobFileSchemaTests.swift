import Foundation
import OvertimeTestSupport
import Testing
@testable import OvertimeCore

/// docs/jobfile.schema.json, which editors check job files with, names the fields and words
/// the decoder reads, and no others: a field added to the decoder and not to the schema fails
/// here. (The values the schema takes are checked against a real validator by
/// Tests/JobFileSchema/test_jobfile_schema.py.)
@Suite struct JobFileSchemaTests {
    /// Fields the schema describes before the decoder reads them: each must be in the schema,
    /// and may be in the decoder's list or not yet. The sweep fields and a JSON file's
    /// `$schema` (the editor's pointer to this schema) arrive in the decoder apart from it.
    static let arriving: [String: Set<String>] = [
        "top": ["$schema"],
        "task": ["matrix", "array", "max-running"],
        "dependency": ["same-index"],
    ]

    static func schema() throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: Checkout.path("docs/jobfile.schema.json")))
        return try #require(JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// The object at `path` (keys from the root), e.g. ["$defs", "task"].
    static func object(_ path: [String]) throws -> [String: Any] {
        var object = try schema()
        for key in path {
            object = try #require(object[key] as? [String: Any], "docs/jobfile.schema.json has no \(path.joined(separator: "/"))")
        }
        return object
    }

    /// The property names the schema's object at `path` lists.
    static func properties(_ path: [String]) throws -> Set<String> {
        Set(try object(path + ["properties"]).keys)
    }

    /// The words an `enum` at `path` lists (in an `anyOf` beside a pattern, the enum's).
    static func words(_ path: [String]) throws -> Set<String> {
        let schema = try object(path)
        let alternatives = (schema["anyOf"] as? [[String: Any]] ?? []) + [schema]
        let words = alternatives.compactMap { $0["enum"] as? [String] }.first
        return Set(try #require(words, "no enum at \(path.joined(separator: "/"))"))
    }

    static let scopes: [(name: String, path: [String], fields: [String])] = [
        ("top", [], JobFileDecoder.topFields),
        ("task", ["$defs", "task"], JobFileDecoder.taskFields),
        ("defaults", ["$defs", "defaults"], JobFileDecoder.defaultsFields),
        ("retries", ["$defs", "retryPolicy"], JobFileDecoder.retryFields),
        ("dependency", ["$defs", "dependencyObject"], JobFileDecoder.dependencyFields),
        ("limits", ["$defs", "limits"], ResourceLimit.Resource.allCases.map(\.rawValue)),
    ]

    @Test(arguments: scopes.map(\.name))
    func theSchemaListsTheFieldsTheDecoderReads(_ scope: String) throws {
        let (_, path, fields) = try #require(Self.scopes.first { $0.name == scope })
        let described = try Self.properties(path)
        let arriving = Self.arriving[scope] ?? []
        let read = Set(fields)
        #expect(read.subtracting(described).isEmpty, "read by the decoder, missing from the schema: \(read.subtracting(described).sorted())")
        #expect(described.subtracting(read).subtracting(arriving).isEmpty,
                "in the schema, not read by the decoder: \(described.subtracting(read).subtracting(arriving).sorted())")
        #expect(arriving.subtracting(described).isEmpty, "arriving fields missing from the schema: \(arriving.subtracting(described).sorted())")
    }

    /// Every task setting has one declaration in the schema's `$defs`, which both a task and
    /// `defaults` refer to.
    @Test func aTaskAndDefaultsShareEachSettingsDeclaration() throws {
        for scope in ["task", "defaults"] {
            let properties = try Self.object(["$defs", scope, "properties"])
            for key in TaskSetting.keys {
                #expect((properties[key] as? [String: Any])?["$ref"] as? String == "#/$defs/\(key)", "\(scope).\(key)")
            }
        }
    }

    @Test func theSchemaListsTheWordsTheDecoderTakes() throws {
        #expect(try Self.words(["$defs", "dependencyObject", "properties", "when"]) == Set(Dependency.Condition.allCases.map(\.rawValue)))
        #expect(try Self.words(["properties", "executor"]) == Set(JobFile.Executor.allCases.map(\.rawValue)))
        let outcomes = try Self.object(["$defs", "retryPolicy", "properties", "on", "items"])
        let listed = (outcomes["anyOf"] as? [[String: Any]] ?? []).compactMap { $0["enum"] as? [String] }.first ?? []
        #expect(Set(listed) == Set(RetryCondition.allCases.map(\.rawValue) + RetryCondition.aliases.keys))
    }
}
