#pragma once
// YAML values of the model to expression Values: typed scalars under the YAML 1.2 core
// schema (true, 1.5, null), and `${{ }}` evaluated where the runner evaluates them.

#include "jobs/expr/expr.hpp"
#include "jobs/expr/value.hpp"
#include "jobs/workflow/yaml_tree.hpp"

namespace jobs {

// Without evaluation: `${{ }}` stays text.
Value yaml_to_value(const YamlNode& node);

// With evaluation: a string holding `${{ }}` becomes interpolate_value() of it (a lone
// expression keeps its kind), recursively through sequences and mappings. Errors carry the
// node's file:line:col in the message.
ExprExpected<Value> evaluate_yaml(const YamlNode& node, const EvalContext& context);

// One mapping entry into `out`: a `${{ insert }}` key splices its (mapping) value in, a key
// holding an expression is evaluated, any other key is taken as written.
ExprExpected<void> evaluate_entry(const YamlEntry& entry, const EvalContext& context, Object& out);

// Interpolates a Text-like string and prefixes errors with its position.
ExprExpected<std::string> interpolate_at(std::string_view text, const SourceMark& mark,
                                         const EvalContext& context);
ExprExpected<Value> interpolate_value_at(std::string_view text, const SourceMark& mark,
                                         const EvalContext& context);
ExprExpected<bool> condition_at(std::string_view text, const SourceMark& mark,
                                const EvalContext& context);

}  // namespace jobs
