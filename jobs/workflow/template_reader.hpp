#pragma once
// GitHub's template reader (actions/languageservices workflow-parser/src/templates/
// template-reader.ts, the C# TemplateReader of actions/runner): validates a YAML tree against
// a definition of a template schema (template_schema.hpp), the same way and in the same order
// as GitHub, and reports the first error as "file:line:col: message" with GitHub's wording:
//  - mapping keys: the definition's properties (one-of mappings narrowed by the keys seen),
//    loose keys where allowed, "Unexpected value 'k'", case-insensitive duplicates ("'k' is
//    already defined"), required properties ("Required property is missing: p");
//  - scalars: null/boolean/number/string definitions, constants, require-non-empty, closed
//    value lists; a non-string scalar may stand for a string ("Unexpected value 'x'");
//  - `${{ }}`: closed ("The expression is not closed..."), not empty ("An expression was
//    expected"), parsed against the contexts and functions the schema allows there (inherited
//    from the enclosing definitions), allowed only where some context is ("A template
//    expression is not allowed in this context"), at most 21,000 characters once the string
//    around them is folded into format() (GitHub's "Exceeded max expression length 21000");
//  - `${{ insert }}` only as a whole mapping key where expressions are allowed;
//  - `if` conditions (the definitions given as condition_types) parsed as GitHub's
//    convertToIfCondition does, with `success() && (...)` added when no status function is
//    called.

#include <span>
#include <string_view>

#include "common/error.hpp"
#include "jobs/workflow/template_schema.hpp"
#include "jobs/workflow/yaml_tree.hpp"

namespace jobs {

struct TemplateReadOptions {
    // Definitions whose values are conditions (`job-if`, `step-if`, ...).
    std::span<const std::string_view> condition_types;
    // Properties GitHub refuses while its background-steps feature is off (the reader's
    // backgroundStepProperties: background, wait, wait-all, cancel).
    bool background_steps = false;
    // Required properties not required here, as "definition/property" (a dialect's leniency).
    std::span<const std::string_view> optional_properties;
};

// Validates `root` against the definition `type` of `schema`. invalid_input with the first
// error; the schema's own definitions are trusted (a missing one is a permanent error).
common::Expected<void> read_template(const schema::Schema& schema, std::string_view type,
                                     const YamlNode& root, const TemplateReadOptions& options = {});

// The `${{ }}` segments of a template string as GitHub splits them (a `}}` inside a 'string'
// literal does not close): true with the expressions' texts (untrimmed) when every `${{` is
// closed.
bool split_expressions(std::string_view text, std::vector<std::string_view>& expressions);

// True when `text` is exactly one `${{ insert }}` (surrounding whitespace allowed), the
// directive that splices a mapping into the one holding it.
bool is_insert_directive(std::string_view text);

}  // namespace jobs
