#include "jobs/workflow/action_model.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "jobs/workflow/template_reader.hpp"
#include "jobs/workflow/template_schema.hpp"
#include "jobs/workflow/workflow_parse.hpp"
#include "sandbox/access/safe_access.hpp"

namespace jobs {
namespace {

using detail::ParseContext;

void parse_inputs(ParseContext& ctx, const YamlNode& node, Action& action) {
    if (node.is_null() || !ctx.require_mapping(node, "inputs")) return;
    for (const auto& entry : node.entries) {
        InputSpec input;
        input.name = entry.key;
        input.mark = entry.key_mark;
        if (entry.value.is_mapping()) {
            const std::string where = "inputs." + entry.key;
            if (const auto* d = entry.value.find("description"))
                input.description = ctx.text(*d, where + ".description").value_or(Text{}).value;
            if (const auto* r = entry.value.find("required"))
                input.required = r->scalar_type() == YamlNode::ScalarType::boolean
                                     ? r->as_bool()
                                     : r->text == "true";
            if (const auto* d = entry.value.find("default")) input.default_value = *d;
        } else if (!entry.value.is_null()) {
            ctx.fail(entry.value.mark, "inputs." + entry.key + " must be a mapping");
            return;
        }
        action.inputs.push_back(std::move(input));
    }
}

void parse_outputs(ParseContext& ctx, const YamlNode& node, Action& action) {
    if (node.is_null() || !ctx.require_mapping(node, "outputs")) return;
    for (const auto& entry : node.entries) {
        OutputSpec output;
        output.name = entry.key;
        output.mark = entry.key_mark;
        if (entry.value.is_mapping()) {
            const std::string where = "outputs." + entry.key;
            if (const auto* v = entry.value.find("value"))
                output.value = ctx.text(*v, where + ".value").value_or(Text{});
            else if (action.kind == ActionKind::composite)
                return (void)ctx.fail(
                    entry.key_mark, "composite action output '" + entry.key + "' needs a 'value'");
        }
        action.outputs.push_back(std::move(output));
    }
}

void parse_runs(ParseContext& ctx, const YamlNode& runs, Action& action) {
    if (!ctx.require_mapping(runs, "runs")) return;
    const YamlNode* using_node = runs.find("using");
    if (using_node == nullptr || !using_node->is_scalar())
        return (void)ctx.fail(runs.mark, "runs needs 'using' (composite, node20, docker)");
    action.using_ = using_node->text;
    // The runner's ConvertRuns: `using` is one of the schema's values (action-v1.0.json `using`).
    const auto* known = schema::action_schema().find("using");
    if (std::ranges::find(known->one_of, std::string_view(action.using_)) == known->one_of.end())
        return (void)ctx.fail(using_node->mark, "unknown runs.using '" + action.using_ +
                                                    "' (composite, node12/16/20/24 or docker)");
    if (action.using_ == "composite") {
        action.kind = ActionKind::composite;
        const YamlNode* steps = runs.find("steps");
        if (steps == nullptr)
            return (void)ctx.fail(runs.mark, "a composite action needs runs.steps");
        action.steps = ctx.steps(*steps, "the composite action", detail::StepsOf::composite_action);
    } else if (action.using_.starts_with("node")) {
        action.kind = ActionKind::node;
        const YamlNode* main = runs.find("main");
        if (main == nullptr)
            return (void)ctx.fail(runs.mark, "a JavaScript action needs runs.main");
        action.main = ctx.text(*main, "runs.main").value_or(Text{}).value;
        if (const auto* pre = runs.find("pre"))
            action.pre = ctx.text(*pre, "runs.pre").value_or(Text{}).value;
        if (const auto* post = runs.find("post"))
            action.post = ctx.text(*post, "runs.post").value_or(Text{}).value;
        if (const auto* c = runs.find("pre-if")) action.pre_if = ctx.text(*c, "runs.pre-if");
        if (const auto* c = runs.find("post-if")) action.post_if = ctx.text(*c, "runs.post-if");
    } else if (action.using_ == "docker") {
        action.kind = ActionKind::docker;
        if (const auto* env = runs.find("env")) action.env = ctx.env(*env, "runs.env");
    }
}

}  // namespace

common::Expected<Action> parse_action(std::string_view text, std::string_view file,
                                      const std::filesystem::path& dir) {
    auto root = SANDGATE_TRY(parse_yaml(text, file));
    // The runner reads action.yml against action-root (ActionManifestManager).
    static constexpr std::string_view k_conditions[] = {"step-if"};
    TemplateReadOptions options;
    options.condition_types = k_conditions;
    SANDGATE_CHECK(read_template(schema::action_schema(), "action-root", root, options));
    ParseContext ctx;
    Action action;
    action.directory = dir;
    action.file = std::string(file);
    auto failed = [&]() { return common::fail(common::ErrorKind::invalid_input, ctx.error()); };
    if (!ctx.require_mapping(root, "an action manifest")) return failed();
    if (const auto* name = root.find("name"))
        action.name = ctx.text(*name, "name").value_or(Text{}).value;
    const YamlNode* runs = root.find("runs");
    if (runs == nullptr) return ctx.fail(root.mark, "the action has no 'runs'"), failed();
    parse_runs(ctx, *runs, action);
    if (const auto* inputs = root.find("inputs")) parse_inputs(ctx, *inputs, action);
    if (const auto* outputs = root.find("outputs")) parse_outputs(ctx, *outputs, action);
    if (!ctx.ok()) return failed();
    return action;
}

common::Expected<Action> load_action(const std::filesystem::path& root,
                                     const std::filesystem::path& dir) {
    const auto relative = sandbox::relative_beneath(root, dir);
    if (!relative)
        return common::fail(
            common::ErrorKind::invalid_input,
            "the local action " + dir.string() + " is not beneath " + root.string());
    auto tree = SANDGATE_TRY(sandbox::SafeDir::open_trusted(root, root.string()));
    const sandbox::ReadLimits limits{4 * 1024 * 1024, std::nullopt, -1};
    for (const char* name : {"action.yml", "action.yaml"}) {
        const auto file = dir / name;
        auto text = SANDGATE_TRY(tree.read_file_if_present(
            (std::filesystem::path(*relative) / name).string(), limits, file.string()));
        if (text) return parse_action(*text, file.string(), dir);
    }
    return common::fail(
        common::ErrorKind::invalid_input,
        "Can't find 'action.yml' or 'action.yaml' under '" + dir.string() +
            "'. Did you forget to run actions/checkout before running your local action?");
}

}  // namespace jobs
