#pragma once
// Internal to the model's parsers (workflow_model.cpp, workflow_steps.cpp, action_model.cpp):
// the shared steps that turn a YamlNode, already validated against GitHub's template schema
// (template_reader.hpp), into model fields, with the rules GitHub's converters add beyond the
// schema (ids, `uses` references, matrices). The first error is recorded.

#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "jobs/workflow/workflow_model.hpp"

namespace jobs::detail {

// Whose steps are parsed: a workflow job's, or a composite action's (which allow no
// control steps and no background steps).
enum class StepsOf { job, composite_action };

// GitHub's IdBuilder.TryAddKnownId for job and step ids: the ids of one scope, compared
// case-insensitively.
class IdScope {
public:
    // nullopt when `id` is valid and new in the scope (it is then added); else GitHub's message.
    std::optional<std::string> add(std::string_view id);

private:
    std::unordered_set<std::string> m_folded;
};

class ParseContext {
public:
    bool ok() const { return m_error.empty(); }
    const std::string& error() const { return m_error; }

    // Records `message` at `mark` unless an earlier error was recorded; returns false.
    bool fail(const SourceMark& mark, std::string_view message);
    // Records an error that already reads "file:line:col: message" (the template reader's).
    bool fail_located(std::string_view message);

    bool require_mapping(const YamlNode& node, std::string_view what);

    // A scalar as a Text (booleans and numbers as written); fails on other kinds.
    std::optional<Text> text(const YamlNode& node, std::string_view what);
    // A mapping of scalars (null values become ""); fails on other kinds.
    TextMap text_map(const YamlNode& node, std::string_view what);
    // A string or a sequence of strings.
    std::vector<std::string> string_list(const YamlNode& node, std::string_view what);
    // Must be a boolean or an expression string.
    std::optional<YamlNode> bool_or_expression(const YamlNode& node, std::string_view what);
    // Must be a number or an expression string.
    std::optional<YamlNode> number_or_expression(const YamlNode& node, std::string_view what);
    // env: a mapping of scalars, or an expression string.
    YamlNode env(const YamlNode& node, std::string_view what);
    RunDefaults defaults(const YamlNode& node, std::string_view what);

    std::vector<Step> steps(const YamlNode& node, std::string_view where, StepsOf owner);
    std::optional<Strategy> strategy(const YamlNode& node, std::string_view where);

private:
    std::optional<Step> step(const YamlNode& node, std::size_t index, std::string_view where,
                             StepsOf owner, IdScope& ids);
    // wait / wait-all / cancel / parallel; false when `node` is none of them.
    bool control_step(const YamlNode& node, Step& step, const std::string& what, StepsOf owner,
                      IdScope& ids);
    // Every wait and cancel target names a background step that comes before it in the job.
    bool check_background_targets(const std::vector<Step>& steps);
    bool check_uses(const Text& uses);
    bool check_matrix(const YamlNode& matrix);

    std::string m_error;
};

bool contains_expression(std::string_view text);

// True when some key of the mapping (at any depth) holds `${{ }}`: such a mapping is kept
// whole and evaluated at run time (`${{ insert }}` splices, an expression key is evaluated).
bool has_expression_key(const YamlNode& node);

// True when the node or anything below it is an expression string.
bool holds_expression(const YamlNode& node);

}  // namespace jobs::detail
