#pragma once
// GitHub's template schemas for workflows and actions (actions/languageservices
// workflow-parser/src/workflow-v1.0.json and action-v1.0.json, MIT), embedded as tables.
//
// The format is GitHub's "template schema": `definitions` maps a name to a node that is a
// mapping (properties, each with a type and `required`, and optionally loose-key-type /
// loose-value-type for free-form keys), a sequence (item-type), a one-of (a list of type
// names), a string (constant, require-non-empty, is-expression, ignore-case), a number, a
// boolean, a null or allowed-values (a closed list of strings). `context` lists the
// expression contexts and functions (`hashFiles(1,255)`) allowed inside `${{ }}` there; a
// node without one inherits its parent's, and where none is inherited no expression may
// appear. The built-in types null, boolean, number, string, sequence, mapping and any are
// GitHub's (template-schema.ts).
//
// The tables (template_schema_tables.cpp) are generated from the schema files by
// tests/support/template_schema_json.cpp (`sandgate-schema-gen`, see tests/CMakeLists.txt);
// tests/unit/jobs/test_template_schema.cpp walks both schema files in ../shared and fails on any
// definition the tables describe differently, so new GitHub syntax shows up as a failing test.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace jobs::schema {

enum class Kind : std::uint8_t {
    null,
    boolean,
    number,
    string,
    sequence,
    mapping,
    one_of,
    allowed_values
};

struct Property {
    std::string_view name{};
    std::string_view type{};
    bool required = false;
};

struct Definition {
    std::string_view name{};
    Kind kind = Kind::null;
    std::span<const std::string_view> context{};
    // mapping
    std::span<const Property> properties{};
    std::string_view loose_key_type{};
    std::string_view loose_value_type{};
    // sequence
    std::string_view item_type{};
    // one-of: the type names; allowed-values: the values
    std::span<const std::string_view> one_of{};
    // string
    std::string_view constant{};
    bool require_non_empty = false;
    bool is_expression = false;
    bool ignore_case = false;
};

struct Schema {
    std::string_view version;
    std::span<const Definition> definitions;

    // The definition named `name` (including the built-in types), or nullptr.
    const Definition* find(std::string_view name) const;
};

const Schema& workflow_schema();
const Schema& action_schema();

// A one-line canonical description of a definition ("mapping properties=a:t!,b:u
// loose=k->v context=github,env"), the form the schema cross-check compares.
std::string describe(const Definition& definition);

// The built-in types (null, boolean, number, string, sequence, mapping, any).
std::span<const Definition> builtin_definitions();

}  // namespace jobs::schema
