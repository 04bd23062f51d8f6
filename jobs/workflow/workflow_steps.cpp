// The parts of workflow parsing shared with action.yml: scalars, env, defaults, steps and
// strategy (see workflow_parse.hpp). The YAML was validated against GitHub's schema first, so
// shapes are known; what is checked here are the rules of GitHub's converters
// (actions/runner WorkflowTemplateConverter.cs, languageservices model/converter/*.ts).
#include <algorithm>
#include <unordered_map>

#include "jobs/expr/value.hpp"
#include "jobs/workflow/matrix.hpp"
#include "jobs/workflow/workflow_parse.hpp"
#include "jobs/workflow/yaml_value.hpp"

namespace jobs::detail {

bool contains_expression(std::string_view text) {
    return text.find("${{") != std::string_view::npos;
}

namespace {

// GitHub's WorkflowConstants.MaxNodeNameLength.
constexpr std::size_t k_max_id_length = 100;

bool is_expression_string(const YamlNode& node) {
    return node.is_scalar() && node.scalar_type() == YamlNode::ScalarType::string &&
           contains_expression(node.text);
}

std::string q(std::string_view what) {
    return "'" + std::string(what) + "'";
}

}  // namespace

std::optional<std::string> IdScope::add(std::string_view id) {
    if (id.empty() || !is_valid_identifier(id) || id.size() >= k_max_id_length) {
        return "The identifier " + q(id) +
               " is invalid. IDs may only contain alphanumeric characters, '_', and '-'. IDs must "
               "start with a "
               "letter or '_' and must be less than " +
               std::to_string(k_max_id_length) + " characters.";
    }
    if (id.starts_with("__"))
        return "The identifier " + q(id) + " is invalid. IDs starting with '__' are reserved.";
    if (!m_folded.insert(fold_case(id)).second)
        return "The identifier " + q(id) + " may not be used more than once within the same scope.";
    return std::nullopt;
}

bool has_expression_key(const YamlNode& node) {
    std::vector<const YamlNode*> pending{&node};
    while (!pending.empty()) {
        const YamlNode* current = pending.back();
        pending.pop_back();
        for (const auto& entry : current->entries) {
            if (contains_expression(entry.key)) return true;
            pending.push_back(&entry.value);
        }
        for (const auto& item : current->items) pending.push_back(&item);
    }
    return false;
}

bool holds_expression(const YamlNode& node) {
    std::vector<const YamlNode*> pending{&node};
    while (!pending.empty()) {
        const YamlNode* current = pending.back();
        pending.pop_back();
        if (is_expression_string(*current)) return true;
        for (const auto& entry : current->entries) {
            if (contains_expression(entry.key)) return true;
            pending.push_back(&entry.value);
        }
        for (const auto& item : current->items) pending.push_back(&item);
    }
    return false;
}

bool ParseContext::fail(const SourceMark& mark, std::string_view message) {
    if (m_error.empty()) m_error = located(mark, message);
    return false;
}

bool ParseContext::fail_located(std::string_view message) {
    if (m_error.empty()) m_error = std::string(message);
    return false;
}

bool ParseContext::require_mapping(const YamlNode& node, std::string_view what) {
    if (node.is_mapping()) return true;
    return fail(node.mark,
                std::string(what) + " must be a mapping, not a " + std::string(node.type_name()));
}

std::optional<Text> ParseContext::text(const YamlNode& node, std::string_view what) {
    if (node.is_null()) return Text{"", node.mark};
    if (!node.is_scalar()) {
        fail(node.mark,
             std::string(what) + " must be a string, not a " + std::string(node.type_name()));
        return std::nullopt;
    }
    return Text{node.text, node.mark};
}

TextMap ParseContext::text_map(const YamlNode& node, std::string_view what) {
    TextMap out;
    if (node.is_null()) return out;
    if (!require_mapping(node, what)) return out;
    out.reserve(node.entries.size());
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
            fail(item.mark,
                 std::string(what) + " must hold strings, not a " + std::string(item.type_name()));
            return out;
        }
        out.push_back(item.text);
    }
    return out;
}

std::optional<YamlNode> ParseContext::bool_or_expression(const YamlNode& node,
                                                         std::string_view what) {
    if (node.scalar_type() == YamlNode::ScalarType::boolean && node.is_scalar()) return node;
    if (is_expression_string(node)) return node;
    fail(node.mark, std::string(what) + " must be a boolean or an expression, not " +
                        (node.is_scalar() ? q(node.text) : "a " + std::string(node.type_name())));
    return std::nullopt;
}

std::optional<YamlNode> ParseContext::number_or_expression(const YamlNode& node,
                                                           std::string_view what) {
    if (node.is_scalar() && node.scalar_type() == YamlNode::ScalarType::number) return node;
    if (is_expression_string(node)) return node;
    fail(node.mark, std::string(what) + " must be a number or an expression, not " +
                        (node.is_scalar() ? q(node.text) : "a " + std::string(node.type_name())));
    return std::nullopt;
}

YamlNode ParseContext::env(const YamlNode& node, std::string_view what) {
    if (node.is_null() || is_expression_string(node)) return node;
    if (!require_mapping(node, what)) return {};
    return node;
}

RunDefaults ParseContext::defaults(const YamlNode& node, std::string_view what) {
    RunDefaults out;
    if (node.is_null() || !require_mapping(node, what)) return out;
    const YamlNode* run = node.find("run");
    if (run == nullptr || run->is_null() || !run->is_mapping()) return out;
    const std::string run_what = std::string(what) + ".run";
    if (const auto* shell = run->find("shell")) out.shell = text(*shell, run_what + ".shell");
    if (const auto* dir = run->find("working-directory"))
        out.working_directory = text(*dir, run_what + ".working-directory");
    return out;
}

// GitHub's check of a `uses` reference (WorkflowTemplateConverter.ConvertToStep): ./local,
// docker://image, or {org}/{repo}[/path]@ref split at '@' and '/' (spaces are GitHub's to
// refuse at resolution, not here).
bool ParseContext::check_uses(const Text& uses) {
    const std::string& value = uses.value;
    if (value.starts_with("docker://") || value.starts_with("./") || value.starts_with(".\\"))
        return true;
    const auto at = value.find('@');
    const bool one_at = at != std::string::npos && value.find('@', at + 1) == std::string::npos;
    std::vector<std::string_view> segments;
    if (one_at) {
        std::string_view path = std::string_view(value).substr(0, at);
        std::size_t start = 0;
        while (start <= path.size()) {
            const auto end = path.find_first_of("/\\", start);
            const auto segment = path.substr(
                start, end == std::string_view::npos ? std::string_view::npos : end - start);
            if (!segment.empty()) segments.push_back(segment);
            if (end == std::string_view::npos) break;
            start = end + 1;
        }
    }
    if (!one_at || segments.size() < 2 || at + 1 == value.size())
        return fail(uses.mark, "Expected format {org}/{repo}[/path]@ref. Actual " + q(value));
    return true;
}

std::optional<Step> ParseContext::step(const YamlNode& node, std::size_t index,
                                       std::string_view where, StepsOf owner, IdScope& ids) {
    const std::string what = std::string(where) + " step " + std::to_string(index + 1);
    if (!require_mapping(node, what)) return std::nullopt;
    Step step;
    step.index = index;
    step.mark = node.mark;
    const YamlNode* run = node.find("run");
    const YamlNode* uses = node.find("uses");
    if (run == nullptr && uses == nullptr) {
        if (!control_step(node, step, what, owner, ids))
            return fail(node.mark,
                        "Expected one of uses, run, wait, wait-all, or cancel to be defined"),
                   std::nullopt;
        if (!ok()) return std::nullopt;
    } else if (run != nullptr) {
        step.run = text(*run, what + ".run");
        if (const auto* shell = node.find("shell"))
            step.shell = text(*shell, what + ".shell");
        else if (owner == StepsOf::composite_action)
            return fail(node.mark, "Required property is missing: shell"), std::nullopt;
        if (const auto* dir = node.find("working-directory"))
            step.working_directory = text(*dir, what + ".working-directory");
    } else {
        step.kind = StepKind::uses;
        step.uses = text(*uses, what + ".uses");
        if (step.uses && !check_uses(*step.uses)) return std::nullopt;
        if (const auto* with = node.find("with")) {
            if (has_expression_key(*with) || is_expression_string(*with))
                step.with_template = *with;
            else
                step.with = text_map(*with, what + ".with");
        }
    }
    if (const auto* id = node.find("id"); id != nullptr && !id->is_null()) {
        auto value = text(*id, what + ".id");
        if (value && !value->value.empty()) {
            if (auto refused = ids.add(value->value)) return fail(id->mark, *refused), std::nullopt;
            step.id = value->value;
        }
    }
    if (const auto* name = node.find("name")) step.name = text(*name, what + ".name");
    if (const auto* cond = node.find("if")) step.condition = text(*cond, what + ".if");
    if (const auto* env_node = node.find("env")) step.env = env(*env_node, what + ".env");
    if (const auto* coe = node.find("continue-on-error"))
        step.continue_on_error = bool_or_expression(*coe, what + ".continue-on-error");
    if (const auto* timeout = node.find("timeout-minutes"))
        step.timeout_minutes = number_or_expression(*timeout, what + ".timeout-minutes");
    if (const auto* background = node.find("background"))
        step.background =
            background->scalar_type() == YamlNode::ScalarType::boolean && background->as_bool();
    if (!ok()) return std::nullopt;
    return step;
}

bool ParseContext::control_step(const YamlNode& node, Step& step, const std::string& what,
                                StepsOf owner, IdScope& ids) {
    const YamlNode* wait = node.find("wait");
    const YamlNode* wait_all = node.find("wait-all");
    const YamlNode* cancel = node.find("cancel");
    const YamlNode* parallel = node.find("parallel");
    if (wait == nullptr && wait_all == nullptr && cancel == nullptr && parallel == nullptr)
        return false;
    if (owner == StepsOf::composite_action)
        return fail(node.mark,
                    "background steps (wait, wait-all, cancel, parallel) are for jobs, not "
                    "composite actions"),
               true;
    if (wait != nullptr) {
        step.kind = StepKind::wait;
        if (wait->is_sequence()) {
            for (const auto& item : wait->items) step.targets.push_back(Text{item.text, item.mark});
        } else {
            step.targets.push_back(Text{wait->text, wait->mark});
        }
    } else if (cancel != nullptr) {
        step.kind = StepKind::cancel;
        step.targets.push_back(Text{cancel->text, cancel->mark});
    } else if (wait_all != nullptr) {
        step.kind = StepKind::wait_all;
        step.wait_all =
            !(wait_all->scalar_type() == YamlNode::ScalarType::boolean && !wait_all->as_bool());
    } else {
        step.kind = StepKind::parallel;
        if (!parallel->is_sequence())
            return fail(parallel->mark, what + ".parallel must be a sequence of steps"), true;
        for (std::size_t i = 0; i < parallel->items.size(); ++i) {
            auto inner = this->step(parallel->items[i], i, what + " parallel", owner, ids);
            if (!inner) return true;
            if (inner->kind != StepKind::run && inner->kind != StepKind::uses)
                return fail(parallel->items[i].mark,
                            "a parallel block holds run and uses steps only"),
                       true;
            inner->background = true;
            inner->block = step.index;
            step.parallel.push_back(std::move(*inner));
        }
    }
    return true;
}

// GitHub's wait and cancel name background steps by id. Checked here, before anything runs:
// the id must belong to a background step (or a step of a parallel block) earlier in the job.
bool ParseContext::check_background_targets(const std::vector<Step>& steps) {
    std::unordered_map<std::string, bool> earlier;  // folded id -> is a background step
    auto note = [&earlier](const Step& step) {
        if (step.id) earlier.emplace(fold_case(*step.id), step.background);
    };
    for (const auto& step : steps) {
        const char* key = step.kind == StepKind::wait ? "wait" : "cancel";
        for (const auto& target : step.targets) {
            const auto found = earlier.find(fold_case(target.value));
            if (found == earlier.end())
                return fail(target.mark, std::string(key) + ": " + q(target.value) +
                                             " is not the id of a step before this one");
            if (!found->second)
                return fail(target.mark,
                            std::string(key) + ": " + q(target.value) +
                                " is not a background step (it has no background: true)");
        }
        note(step);
        for (const auto& inner : step.parallel) note(inner);
    }
    return true;
}

std::vector<Step> ParseContext::steps(const YamlNode& node, std::string_view where, StepsOf owner) {
    std::vector<Step> out;
    if (node.is_null()) return out;
    if (!node.is_sequence()) {
        fail(node.mark, std::string(where) + ": 'steps' must be a sequence, not a " +
                            std::string(node.type_name()));
        return out;
    }
    IdScope ids;
    for (std::size_t i = 0; i < node.items.size(); ++i) {
        auto parsed = step(node.items[i], i, where, owner, ids);
        if (!parsed) return out;
        out.push_back(std::move(*parsed));
    }
    if (owner == StepsOf::job) check_background_targets(out);
    return out;
}

// GitHub's ConvertToStrategy for a matrix without expressions: every vector has values, the
// matrix defines a vector or an include, include and exclude entries are not empty, and the
// matrix expands (after exclude) to at most 256 combinations. A matrix holding expressions is
// checked when it is evaluated, before the job runs.
bool ParseContext::check_matrix(const YamlNode& matrix) {
    if (is_expression_string(matrix) || !matrix.is_mapping()) return true;
    bool has_vector = false, has_include = false;
    for (const auto& entry : matrix.entries) {
        if (contains_expression(entry.key)) {
            has_vector = true;
            continue;
        }
        const YamlNode& value = entry.value;
        if (entry.key == "include" || entry.key == "exclude") {
            if (!value.is_sequence()) continue;
            if (entry.key == "include") has_include = has_include || !value.items.empty();
            for (const auto& item : value.items) {
                if (item.is_mapping() && item.entries.empty())
                    return fail(item.mark,
                                "Matrix " + entry.key + " mapping does not contain any values");
            }
            continue;
        }
        has_vector = true;
        if (value.is_sequence() && value.items.empty())
            return fail(value.mark,
                        "Matrix vector " + q(entry.key) + " does not contain any values");
    }
    if (!has_vector && !has_include)
        return fail(matrix.mark, "Matrix must define at least one vector");
    if (holds_expression(matrix)) return true;
    auto expanded = expand_matrix(yaml_to_value(matrix));
    if (!expanded) return fail(matrix.mark, expanded.error().message);
    return true;
}

std::optional<Strategy> ParseContext::strategy(const YamlNode& node, std::string_view where) {
    const std::string what = std::string(where) + ".strategy";
    Strategy out;
    out.mark = node.mark;
    if (is_expression_string(node)) {
        out.computed = node;
        return out;
    }
    if (!require_mapping(node, what)) return std::nullopt;
    if (const auto* matrix = node.find("matrix")) {
        if (!check_matrix(*matrix)) return std::nullopt;
        out.matrix = *matrix;
    }
    if (const auto* ff = node.find("fail-fast"))
        out.fail_fast = bool_or_expression(*ff, what + ".fail-fast");
    if (const auto* mp = node.find("max-parallel"))
        out.max_parallel = number_or_expression(*mp, what + ".max-parallel");
    if (!ok()) return std::nullopt;
    return out;
}

}  // namespace jobs::detail
