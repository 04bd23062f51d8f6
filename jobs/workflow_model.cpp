#include "jobs/workflow_model.hpp"

#include <algorithm>
#include <functional>
#include <fstream>
#include <map>
#include <sstream>

#include "jobs/workflow_parse.hpp"

namespace jobs {
namespace {

using detail::ParseContext;

constexpr std::string_view k_events[] = {
    "branch_protection_rule", "check_run", "check_suite", "create", "delete", "deployment",
    "deployment_status", "discussion", "discussion_comment", "fork", "gollum", "issue_comment",
    "issues", "label", "merge_group", "milestone", "page_build", "project", "project_card",
    "project_column", "public", "pull_request", "pull_request_review",
    "pull_request_review_comment", "pull_request_target", "push", "registry_package", "release",
    "repository_dispatch", "schedule", "status", "watch", "workflow_call", "workflow_dispatch",
    "workflow_run",
};

bool is_known_event(std::string_view event) {
    return std::ranges::find(k_events, event) != std::end(k_events);
}

std::string q(std::string_view s) { return "'" + std::string(s) + "'"; }

std::vector<InputSpec> parse_inputs(ParseContext& ctx, const YamlNode& node, std::string_view what,
                                     bool dispatch) {
    std::vector<InputSpec> out;
    if (node.is_null() || !ctx.require_mapping(node, what)) return out;
    for (const auto& entry : node.entries) {
        const std::string where = std::string(what) + "." + entry.key;
        InputSpec input;
        input.name = entry.key;
        input.mark = entry.key_mark;
        if (entry.value.is_null()) {
            out.push_back(std::move(input));
            continue;
        }
        if (!ctx.require_mapping(entry.value, where)) return out;
        if (dispatch ? !ctx.check_keys(entry.value, {"description", "required", "default", "type",
                                                      "options", "deprecationMessage"}, where)
                     : !ctx.check_keys(entry.value, {"description", "required", "default", "type",
                                                      "deprecationMessage"}, where))
            return out;
        if (const auto* d = entry.value.find("description"))
            input.description = ctx.text(*d, where + ".description").value_or(Text{}).value;
        if (const auto* r = entry.value.find("required")) {
            if (r->scalar_type() != YamlNode::ScalarType::boolean || !r->is_scalar())
                return ctx.fail(r->mark, where + ".required must be a boolean"), out;
            input.required = r->as_bool();
        }
        if (const auto* d = entry.value.find("default")) input.default_value = *d;
        if (const auto* t = entry.value.find("type")) {
            input.type = ctx.text(*t, where + ".type").value_or(Text{}).value;
            const bool known = dispatch ? (input.type == "string" || input.type == "boolean" ||
                                           input.type == "number" || input.type == "choice" ||
                                           input.type == "environment")
                                        : (input.type == "string" || input.type == "boolean" ||
                                           input.type == "number");
            if (!known) return ctx.fail(t->mark, where + ": unknown input type " + q(input.type)), out;
        }
        if (const auto* o = entry.value.find("options")) input.options = ctx.string_list(*o, where + ".options");
        if (input.type == "choice" && input.options.empty())
            return ctx.fail(entry.key_mark, where + ": a choice input needs 'options'"), out;
        out.push_back(std::move(input));
    }
    return out;
}

void parse_call(ParseContext& ctx, const YamlNode& node, Triggers& on) {
    if (node.is_null() || !ctx.require_mapping(node, "on.workflow_call")) return;
    if (!ctx.check_keys(node, {"inputs", "secrets", "outputs"}, "on.workflow_call")) return;
    if (const auto* inputs = node.find("inputs"))
        on.call_inputs = parse_inputs(ctx, *inputs, "on.workflow_call.inputs", false);
    if (const auto* secrets = node.find("secrets"); secrets && !secrets->is_null()) {
        if (!ctx.require_mapping(*secrets, "on.workflow_call.secrets")) return;
        for (const auto& entry : secrets->entries) {
            SecretSpec secret;
            secret.name = entry.key;
            secret.mark = entry.key_mark;
            if (const auto* r = entry.value.find("required")) secret.required = r->as_bool();
            on.call_secrets.push_back(std::move(secret));
        }
    }
    if (const auto* outputs = node.find("outputs"); outputs && !outputs->is_null()) {
        if (!ctx.require_mapping(*outputs, "on.workflow_call.outputs")) return;
        for (const auto& entry : outputs->entries) {
            const std::string where = "on.workflow_call.outputs." + entry.key;
            if (!ctx.require_mapping(entry.value, where) ||
                !ctx.check_keys(entry.value, {"description", "value"}, where))
                return;
            const auto* value = entry.value.find("value");
            if (value == nullptr) return (void)ctx.fail(entry.key_mark, where + " needs a 'value'");
            on.call_outputs.push_back(
                OutputSpec{entry.key, ctx.text(*value, where + ".value").value_or(Text{}), entry.key_mark});
        }
    }
}

void parse_event(ParseContext& ctx, const std::string& event, const SourceMark& mark,
                 const YamlNode* config, Triggers& on) {
    if (!is_known_event(event)) return (void)ctx.fail(mark, "unknown event " + q(event) + " in 'on'");
    if (on.find(event) != nullptr) return (void)ctx.fail(mark, "the event " + q(event) + " is listed twice");
    EventTrigger trigger;
    trigger.event = event;
    trigger.mark = mark;
    if (config != nullptr && !config->is_null()) {
        const std::string where = "on." + event;
        if (event == "workflow_dispatch") {
            if (ctx.require_mapping(*config, where) && ctx.check_keys(*config, {"inputs"}, where)) {
                if (const auto* inputs = config->find("inputs"))
                    on.dispatch_inputs = parse_inputs(ctx, *inputs, where + ".inputs", true);
            }
        } else if (event == "workflow_call") {
            parse_call(ctx, *config, on);
        } else if (event == "schedule") {
            if (!config->is_sequence()) ctx.fail(config->mark, "on.schedule must be a sequence of {cron: ...}");
        } else if (ctx.require_mapping(*config, where)) {
            if (event == "push" || event == "pull_request" || event == "pull_request_target") {
                ctx.check_keys(*config, {"branches", "branches-ignore", "tags", "tags-ignore",
                                         "paths", "paths-ignore", "types"}, where);
                for (auto [a, b] : {std::pair{"branches", "branches-ignore"},
                                    std::pair{"tags", "tags-ignore"}, std::pair{"paths", "paths-ignore"}}) {
                    if (config->find(a) && config->find(b))
                        ctx.fail(config->mark, where + ": '" + a + "' and '" + b +
                                                   "' cannot be used together");
                }
            } else if (event == "workflow_run" || event == "merge_group") {
                // merge_group filters on the queue's target branch (GitHub's changelog example
                // `merge_group: branches: [main]`), workflow_run on the triggering run's branch.
                if (event == "workflow_run")
                    ctx.check_keys(*config, {"workflows", "types", "branches", "branches-ignore"}, where);
                else
                    ctx.check_keys(*config, {"types", "branches", "branches-ignore"}, where);
                if (config->find("branches") && config->find("branches-ignore"))
                    ctx.fail(config->mark, where + ": 'branches' and 'branches-ignore' cannot be used together");
            } else {
                ctx.check_keys(*config, {"types"}, where);
            }
        }
        trigger.filters = *config;
    }
    on.events.push_back(std::move(trigger));
}

Triggers parse_on(ParseContext& ctx, const YamlNode& node) {
    Triggers on;
    if (node.is_scalar()) {
        parse_event(ctx, node.text, node.mark, nullptr, on);
    } else if (node.is_sequence()) {
        for (const auto& item : node.items) {
            if (!item.is_scalar()) return ctx.fail(item.mark, "'on' entries must be event names"), on;
            parse_event(ctx, item.text, item.mark, nullptr, on);
        }
    } else if (node.is_mapping()) {
        for (const auto& entry : node.entries) parse_event(ctx, entry.key, entry.key_mark, &entry.value, on);
    } else {
        ctx.fail(node.mark, "'on' must name at least one event");
    }
    if (ctx.ok() && on.events.empty()) ctx.fail(node.mark, "'on' must name at least one event");
    return on;
}

void parse_job_call(ParseContext& ctx, const YamlNode& node, Job& job, const std::string& where) {
    if (!ctx.check_keys(node, {"name", "uses", "with", "secrets", "needs", "if", "permissions",
                               "strategy", "concurrency"}, where))
        return;
    job.uses = ctx.text(*node.find("uses"), where + ".uses");
    if (job.uses && !job.uses->value.starts_with("./") &&
        job.uses->value.find('@') == std::string::npos)
        return (void)ctx.fail(job.uses->mark, where + ": a reusable workflow is ./path/to/file.yml or "
                                              "{owner}/{repo}/path/to/file.yml@{ref}");
    if (const auto* with = node.find("with"); with && !with->is_null()) {
        if (!ctx.require_mapping(*with, where + ".with")) return;
        for (const auto& entry : with->entries) {
            if (!entry.value.is_scalar() && !entry.value.is_null())
                return (void)ctx.fail(entry.value.mark, where + ".with." + entry.key + " must be a scalar");
            job.with.emplace_back(entry.key, entry.value);
        }
    }
    if (const auto* secrets = node.find("secrets"); secrets && !secrets->is_null()) {
        if (secrets->is_scalar() && secrets->text == "inherit") {
            job.secrets_mode = SecretsMode::inherit;
        } else {
            job.secrets_mode = SecretsMode::map;
            job.secrets = ctx.text_map(*secrets, where + ".secrets");
        }
    }
}

void parse_job_body(ParseContext& ctx, const YamlNode& node, Job& job, const std::string& where) {
    if (!ctx.check_keys(node, {"name", "needs", "permissions", "if", "runs-on", "environment",
                               "concurrency", "outputs", "env", "defaults", "steps",
                               "timeout-minutes", "strategy", "continue-on-error", "container",
                               "services"}, where))
        return;
    const auto* runs_on = node.find("runs-on");
    if (runs_on == nullptr || runs_on->is_null())
        return (void)ctx.fail(node.mark, where + " needs 'runs-on'");
    job.runs_on = *runs_on;
    const auto* steps = node.find("steps");
    if (steps == nullptr) return (void)ctx.fail(node.mark, where + " needs 'steps'");
    job.steps = ctx.steps(*steps, where, false);
    if (const auto* env = node.find("env")) job.env = ctx.env(*env, where + ".env");
    if (const auto* d = node.find("defaults")) job.defaults = ctx.defaults(*d, where + ".defaults");
    if (const auto* o = node.find("outputs")) job.outputs = ctx.text_map(*o, where + ".outputs");
    if (const auto* c = node.find("continue-on-error"))
        job.continue_on_error = ctx.bool_or_expression(*c, where + ".continue-on-error");
    if (const auto* t = node.find("timeout-minutes"))
        job.timeout_minutes = ctx.number_or_expression(*t, where + ".timeout-minutes");
}

std::optional<Job> parse_job(ParseContext& ctx, const YamlEntry& entry) {
    const std::string where = "job '" + entry.key + "'";
    if (!is_valid_identifier(entry.key)) {
        ctx.fail(entry.key_mark, "invalid job id " + q(entry.key) +
                                     ": it must start with a letter or '_' and hold only letters, "
                                     "digits, '-' and '_'");
        return std::nullopt;
    }
    if (!ctx.require_mapping(entry.value, where)) return std::nullopt;
    Job job;
    job.id = entry.key;
    job.mark = entry.key_mark;
    const YamlNode& node = entry.value;
    if (node.find("uses") != nullptr) parse_job_call(ctx, node, job, where);
    else parse_job_body(ctx, node, job, where);
    if (const auto* name = node.find("name")) job.name = ctx.text(*name, where + ".name");
    if (const auto* cond = node.find("if")) job.condition = ctx.text(*cond, where + ".if");
    if (const auto* needs = node.find("needs")) job.needs = ctx.string_list(*needs, where + ".needs");
    if (const auto* s = node.find("strategy")) job.strategy = ctx.strategy(*s, where);
    if (!ctx.ok()) return std::nullopt;
    return job;
}

void check_needs(ParseContext& ctx, const Workflow& workflow, const YamlNode& jobs_node) {
    for (const auto& job : workflow.jobs) {
        const YamlNode* needs = jobs_node.find(job.id)->find("needs");
        for (const auto& need : job.needs) {
            if (workflow.find_job(need) == nullptr) {
                ctx.fail(needs->mark, "job " + q(job.id) + " depends on unknown job " + q(need));
                return;
            }
        }
    }
    // Depth-first search for a cycle, reporting the path.
    std::map<std::string, int> state;  // 0 new, 1 on the stack, 2 done
    std::vector<std::string> stack;
    std::function<bool(const Job&)> visit = [&](const Job& job) {
        state[job.id] = 1;
        stack.push_back(job.id);
        for (const auto& need : job.needs) {
            if (state[need] == 1) {
                std::string path;
                auto from = std::ranges::find(stack, need);
                for (auto it = from; it != stack.end(); ++it) path += *it + " -> ";
                ctx.fail(jobs_node.find(job.id)->find("needs")->mark, "cyclic 'needs': " + path + need);
                return false;
            }
            if (state[need] == 0 && !visit(*workflow.find_job(need))) return false;
        }
        stack.pop_back();
        state[job.id] = 2;
        return true;
    };
    for (const auto& job : workflow.jobs) {
        if (state[job.id] == 0 && !visit(job)) return;
    }
}

}  // namespace

const EventTrigger* Triggers::find(std::string_view event) const {
    for (const auto& trigger : events) {
        if (trigger.event == event) return &trigger;
    }
    return nullptr;
}

std::string Step::display_name() const {
    if (name) return name->value;
    if (run) {
        std::string first = run->value.substr(0, run->value.find('\n'));
        return "Run " + first;
    }
    return uses ? "Run " + uses->value : "step " + std::to_string(index + 1);
}

const Job* Workflow::find_job(std::string_view id) const {
    for (const auto& job : jobs) {
        if (job.id == id) return &job;
    }
    return nullptr;
}

std::string Workflow::display_name() const {
    if (name && !detail::contains_expression(name->value)) return name->value;
    return file;
}

bool is_valid_identifier(std::string_view id) {
    if (id.empty()) return false;
    auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
    if (!alpha(id[0])) return false;
    return std::ranges::all_of(id, [&](char c) { return alpha(c) || (c >= '0' && c <= '9') || c == '-'; });
}

sandbox::Expected<Workflow> parse_workflow(std::string_view text, std::string_view file) {
    auto root = parse_yaml(text, file);
    if (!root) return std::unexpected(root.error());
    ParseContext ctx;
    Workflow workflow;
    workflow.file = std::string(file);
    auto failed = [&]() { return sandbox::fail(sandbox::ErrorKind::invalid_input, ctx.error()); };
    if (!ctx.require_mapping(*root, "a workflow") ||
        !ctx.check_keys(*root, {"name", "run-name", "on", "env", "defaults", "concurrency", "jobs",
                                "permissions"}, "the workflow"))
        return failed();
    const YamlNode* on = root->find("on");
    if (on == nullptr) return ctx.fail(root->mark, "the workflow has no 'on'"), failed();
    workflow.on = parse_on(ctx, *on);
    if (const auto* name = root->find("name")) workflow.name = ctx.text(*name, "name");
    if (const auto* name = root->find("run-name")) workflow.run_name = ctx.text(*name, "run-name");
    if (const auto* env = root->find("env")) workflow.env = ctx.env(*env, "env");
    if (const auto* d = root->find("defaults")) workflow.defaults = ctx.defaults(*d, "defaults");
    const YamlNode* jobs_node = root->find("jobs");
    if (jobs_node == nullptr) return ctx.fail(root->mark, "the workflow has no 'jobs'"), failed();
    if (!ctx.ok() || !ctx.require_mapping(*jobs_node, "'jobs'")) return failed();
    if (jobs_node->entries.empty()) return ctx.fail(jobs_node->mark, "'jobs' is empty"), failed();
    for (const auto& entry : jobs_node->entries) {
        auto job = parse_job(ctx, entry);
        if (!job) return failed();
        workflow.jobs.push_back(std::move(*job));
    }
    check_needs(ctx, workflow, *jobs_node);
    if (!ctx.ok()) return failed();
    return workflow;
}

sandbox::Expected<Workflow> load_workflow(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return sandbox::fail(sandbox::ErrorKind::invalid_input, path.string() + ": cannot read the file");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return parse_workflow(buffer.str(), path.string());
}

std::vector<std::string> topological_order(const Workflow& workflow) {
    std::vector<std::string> order;
    std::vector<bool> placed(workflow.jobs.size(), false);
    auto is_placed = [&](const std::string& id) { return std::ranges::find(order, id) != order.end(); };
    bool progress = true;
    while (progress && order.size() < workflow.jobs.size()) {
        progress = false;
        for (std::size_t i = 0; i < workflow.jobs.size(); ++i) {
            if (placed[i]) continue;
            if (std::ranges::all_of(workflow.jobs[i].needs, is_placed)) {
                order.push_back(workflow.jobs[i].id);
                placed[i] = true;
                progress = true;
            }
        }
    }
    return order;
}

}  // namespace jobs
