// The parts of workflow parsing shared with action.yml: scalars, env, defaults, steps and
// strategy (see workflow_parse.hpp).
#include <regex>
#include <set>

#include "jobs/workflow_parse.hpp"

namespace jobs::detail {

bool contains_expression(std::string_view text) { return text.find("${{") != std::string_view::npos; }

namespace {

bool is_expression_string(const YamlNode& node) {
    return node.is_scalar() && node.scalar_type() == YamlNode::ScalarType::string &&
           contains_expression(node.text);
}

std::string q(std::string_view what) { return "'" + std::string(what) + "'"; }

}  // namespace

bool ParseContext::fail(const SourceMark& mark, std::string_view message) {
    if (m_error.empty()) m_error = located(mark, message);
    return false;
}

bool ParseContext::require_mapping(const YamlNode& node, std::string_view what) {
    if (node.is_mapping()) return true;
    return fail(node.mark, std::string(what) + " must be a mapping, not a " +
                               std::string(node.type_name()));
}

bool ParseContext::check_keys(const YamlNode& mapping,
                              std::initializer_list<std::string_view> allowed,
                              std::string_view where) {
    for (const auto& entry : mapping.entries) {
        bool known = false;
        for (auto key : allowed) known = known || key == entry.key;
        if (!known)
            return fail(entry.key_mark, "unknown key " + q(entry.key) + " in " + std::string(where));
    }
    return true;
}

std::optional<Text> ParseContext::text(const YamlNode& node, std::string_view what) {
    if (node.is_null()) return Text{"", node.mark};
    if (!node.is_scalar()) {
        fail(node.mark, std::string(what) + " must be a string, not a " + std::string(node.type_name()));
        return std::nullopt;
    }
    return Text{node.text, node.mark};
}

TextMap ParseContext::text_map(const YamlNode& node, std::string_view what) {
    TextMap out;
    if (node.is_null()) return out;
    if (!require_mapping(node, what)) return out;
    for (const auto& entry : node.entries) {
        auto value = text(entry.value, std::string(what) + "." + entry.key);
        if (!value) return out;
        out.emplace_back(entry.key, *value);
    }
    return out;
}

std::vector<std::string> ParseContext::string_list(const YamlNode& node, std::string_view what) {
    std::vector<std::string> out;
    if (node.is_scalar()) {
        out.push_back(node.text);
        return out;
    }
    if (!node.is_sequence()) {
        fail(node.mark, std::string(what) + " must be a string or a sequence of strings");
        return out;
    }
    for (const auto& item : node.items) {
        if (!item.is_scalar()) {
            fail(item.mark, std::string(what) + " must hold strings, not a " + std::string(item.type_name()));
            return out;
        }
        out.push_back(item.text);
    }
    return out;
}

std::optional<YamlNode> ParseContext::bool_or_expression(const YamlNode& node, std::string_view what) {
    if (node.scalar_type() == YamlNode::ScalarType::boolean && node.is_scalar()) return node;
    if (is_expression_string(node)) return node;
    fail(node.mark, std::string(what) + " must be a boolean or an expression, not " +
                        (node.is_scalar() ? q(node.text) : "a " + std::string(node.type_name())));
    return std::nullopt;
}

std::optional<YamlNode> ParseContext::number_or_expression(const YamlNode& node, std::string_view what) {
    if (node.is_scalar() && node.scalar_type() == YamlNode::ScalarType::number) return node;
    if (is_expression_string(node)) return node;
    fail(node.mark, std::string(what) + " must be a number or an expression, not " +
                        (node.is_scalar() ? q(node.text) : "a " + std::string(node.type_name())));
    return std::nullopt;
}

YamlNode ParseContext::env(const YamlNode& node, std::string_view what) {
    if (node.is_null() || is_expression_string(node)) return node;
    if (!require_mapping(node, what)) return {};
    for (const auto& entry : node.entries) {
        if (entry.value.is_sequence() || entry.value.is_mapping())
            fail(entry.value.mark, std::string(what) + "." + entry.key + " must be a string, not a " +
                                       std::string(entry.value.type_name()));
    }
    return node;
}

RunDefaults ParseContext::defaults(const YamlNode& node, std::string_view what) {
    RunDefaults out;
    if (node.is_null() || !require_mapping(node, what)) return out;
    if (!check_keys(node, {"run"}, what)) return out;
    const YamlNode* run = node.find("run");
    if (run == nullptr || run->is_null()) return out;
    const std::string run_what = std::string(what) + ".run";
    if (!require_mapping(*run, run_what) || !check_keys(*run, {"shell", "working-directory"}, run_what))
        return out;
    if (const auto* shell = run->find("shell")) out.shell = text(*shell, run_what + ".shell");
    if (const auto* dir = run->find("working-directory"))
        out.working_directory = text(*dir, run_what + ".working-directory");
    return out;
}

bool ParseContext::check_uses(const Text& uses) {
    const std::string& value = uses.value;
    if (value.starts_with("./") || value == "." || value.starts_with("docker://")) return true;
    if (contains_expression(value))
        return fail(uses.mark, "'uses' cannot hold an expression: " + q(value));
    static const std::regex k_remote(R"([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(/[^@]+)?@[^@\s]+)");
    if (!std::regex_match(value, k_remote))
        return fail(uses.mark, "expected 'uses' as {owner}/{repo}[/path]@{ref}, ./local/path or "
                               "docker://image; got " + q(value));
    return true;
}

std::optional<Step> ParseContext::step(const YamlNode& node, std::size_t index,
                                       std::string_view where, bool composite) {
    const std::string what = std::string(where) + " step " + std::to_string(index + 1);
    if (!require_mapping(node, what)) return std::nullopt;
    Step step;
    step.index = index;
    step.mark = node.mark;
    const YamlNode* run = node.find("run");
    const YamlNode* uses = node.find("uses");
    if (run != nullptr && uses != nullptr)
        return fail(node.mark, what + " has both 'run' and 'uses'; a step has exactly one"), std::nullopt;
    if (run == nullptr && uses == nullptr)
        return fail(node.mark, what + " has neither 'run' nor 'uses'"), std::nullopt;
    if (run != nullptr) {
        if (!check_keys(node, {"id", "if", "name", "run", "working-directory", "shell", "env",
                               "continue-on-error", "timeout-minutes"}, what))
            return std::nullopt;
        step.run = text(*run, what + ".run");
        if (const auto* shell = node.find("shell")) step.shell = text(*shell, what + ".shell");
        else if (composite)
            return fail(node.mark, what + ": a composite action's run step needs 'shell'"), std::nullopt;
        if (const auto* dir = node.find("working-directory"))
            step.working_directory = text(*dir, what + ".working-directory");
    } else {
        if (!check_keys(node, {"id", "if", "name", "uses", "with", "env", "continue-on-error",
                               "timeout-minutes"}, what))
            return std::nullopt;
        step.uses = text(*uses, what + ".uses");
        if (step.uses && !check_uses(*step.uses)) return std::nullopt;
        if (const auto* with = node.find("with")) step.with = text_map(*with, what + ".with");
    }
    if (const auto* id = node.find("id")) {
        auto value = text(*id, what + ".id");
        if (value && !is_valid_identifier(value->value))
            return fail(id->mark, "invalid step id " + q(value->value) +
                                      ": it must start with a letter or '_' and hold only "
                                      "letters, digits, '-' and '_'"), std::nullopt;
        if (value) step.id = value->value;
    }
    if (const auto* name = node.find("name")) step.name = text(*name, what + ".name");
    if (const auto* cond = node.find("if")) step.condition = text(*cond, what + ".if");
    if (const auto* env_node = node.find("env")) step.env = env(*env_node, what + ".env");
    if (const auto* coe = node.find("continue-on-error"))
        step.continue_on_error = bool_or_expression(*coe, what + ".continue-on-error");
    if (const auto* timeout = node.find("timeout-minutes"))
        step.timeout_minutes = number_or_expression(*timeout, what + ".timeout-minutes");
    if (!ok()) return std::nullopt;
    return step;
}

std::vector<Step> ParseContext::steps(const YamlNode& node, std::string_view where, bool composite) {
    std::vector<Step> out;
    if (!node.is_sequence()) {
        fail(node.mark, std::string(where) + ": 'steps' must be a sequence, not a " +
                            std::string(node.type_name()));
        return out;
    }
    if (node.items.empty() && !composite) {
        fail(node.mark, std::string(where) + ": 'steps' is empty");
        return out;
    }
    std::set<std::string> ids;
    for (std::size_t i = 0; i < node.items.size(); ++i) {
        auto parsed = step(node.items[i], i, where, composite);
        if (!parsed) return out;
        if (parsed->id && !ids.insert(*parsed->id).second) {
            fail(node.items[i].find("id")->mark,
                 "the step id " + q(*parsed->id) + " is used more than once in " + std::string(where));
            return out;
        }
        out.push_back(std::move(*parsed));
    }
    return out;
}

bool ParseContext::check_matrix(const YamlNode& matrix) {
    if (is_expression_string(matrix)) return true;
    if (!require_mapping(matrix, "strategy.matrix")) return false;
    if (matrix.entries.empty())
        return fail(matrix.mark, "strategy.matrix must define at least one vector or 'include'");
    for (const auto& entry : matrix.entries) {
        const YamlNode& value = entry.value;
        if (is_expression_string(value)) continue;
        if (entry.key == "include" || entry.key == "exclude") {
            if (!value.is_sequence())
                return fail(value.mark, "strategy.matrix." + entry.key + " must be a sequence of mappings");
            for (const auto& item : value.items) {
                if (!item.is_mapping() && !is_expression_string(item))
                    return fail(item.mark, "strategy.matrix." + entry.key +
                                               " entries must be mappings, not a " +
                                               std::string(item.type_name()));
            }
            continue;
        }
        if (!value.is_sequence())
            return fail(value.mark, "the matrix vector " + q(entry.key) +
                                        " must be a sequence, not a " + std::string(value.type_name()));
        if (value.items.empty())
            return fail(value.mark, "the matrix vector " + q(entry.key) + " has no values");
    }
    return true;
}

std::optional<Strategy> ParseContext::strategy(const YamlNode& node, std::string_view where) {
    const std::string what = std::string(where) + ".strategy";
    if (!require_mapping(node, what) ||
        !check_keys(node, {"matrix", "fail-fast", "max-parallel"}, what))
        return std::nullopt;
    Strategy out;
    out.mark = node.mark;
    if (const auto* matrix = node.find("matrix")) {
        if (!check_matrix(*matrix)) return std::nullopt;
        out.matrix = *matrix;
    }
    if (const auto* ff = node.find("fail-fast")) out.fail_fast = bool_or_expression(*ff, what + ".fail-fast");
    if (const auto* mp = node.find("max-parallel")) {
        out.max_parallel = number_or_expression(*mp, what + ".max-parallel");
        if (out.max_parallel && out.max_parallel->scalar_type() == YamlNode::ScalarType::number &&
            out.max_parallel->as_number() < 1)
            fail(mp->mark, what + ".max-parallel must be at least 1");
    }
    if (!ok()) return std::nullopt;
    return out;
}

}  // namespace jobs::detail
