#pragma once
// Internal to the model's parsers (workflow_model.cpp, workflow_steps.cpp, action_model.cpp):
// the shared checks that turn a YamlNode into model fields and record the first error.

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "jobs/workflow_model.hpp"

namespace jobs::detail {

class ParseContext {
public:
    bool ok() const { return m_error.empty(); }
    const std::string& error() const { return m_error; }

    // Records `message` at `mark` unless an earlier error was recorded; returns false.
    bool fail(const SourceMark& mark, std::string_view message);

    bool require_mapping(const YamlNode& node, std::string_view what);
    // Fails on the first key not in `allowed` ("unknown key 'x' in WHERE").
    bool check_keys(const YamlNode& mapping, std::initializer_list<std::string_view> allowed,
                    std::string_view where);

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

    std::vector<Step> steps(const YamlNode& node, std::string_view where, bool composite);
    std::optional<Strategy> strategy(const YamlNode& node, std::string_view where);

private:
    std::optional<Step> step(const YamlNode& node, std::size_t index, std::string_view where,
                             bool composite);
    bool check_uses(const Text& uses);
    bool check_matrix(const YamlNode& matrix);

    std::string m_error;
};

bool contains_expression(std::string_view text);

}  // namespace jobs::detail
