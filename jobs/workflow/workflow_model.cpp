#include "jobs/workflow/workflow_model.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "jobs/expr/value.hpp"
#include "jobs/workflow/template_reader.hpp"
#include "jobs/workflow/template_schema.hpp"
#include "jobs/workflow/workflow_parse.hpp"

namespace jobs {
namespace {

using detail::ParseContext;

std::string q(std::string_view s) {
    return "'" + std::string(s) + "'";
}

// The conditions GitHub's converters parse (convertToIfCondition).
constexpr std::string_view k_conditions[] = {"job-if", "step-if", "snapshot-if"};

const schema::Schema& workflow_grammar() {
    return schema::workflow_schema();
}

// The events GitHub knows and how each is configured: the schema's on-mapping-strict.
const schema::Property* find_event(std::string_view event) {
    static const schema::Definition* events = workflow_grammar().find("on-mapping-strict");
    for (const auto& property : events->properties) {
        if (property.name == event) return &property;
    }
    return nullptr;
}

bool fail_with(ParseContext& ctx, const common::Expected<void>& read) {
    if (read) return true;
    return ctx.fail_located(read.error().message);
}

// `on:` as GitHub's strict reading has it: every event known, each configuration valid for
// its event. The schema's `*-string` constants are not used for the name forms: one of them
// is wrong upstream (repository-dispatch-string reads "branch_protection_rule"), and the
// cross-check test holds each one to its on-mapping-strict key.
// workflow_dispatch ignores keys it does not know, as GitHub does (languageservices'
// on-workflow_dispatch-unknown-keys-ignored).
bool check_event_config(ParseContext& ctx, const YamlEntry& entry,
                        const TemplateReadOptions& options) {
    const schema::Property* event = find_event(entry.key);
    if (event == nullptr) return ctx.fail(entry.key_mark, "Unexpected value " + q(entry.key));
    if (entry.key == "workflow_dispatch" && entry.value.is_mapping()) {
        const YamlNode* inputs = entry.value.find("inputs");
        if (inputs == nullptr) return true;
        return fail_with(
            ctx, read_template(workflow_grammar(), "workflow-dispatch-inputs", *inputs, options));
    }
    return fail_with(ctx, read_template(workflow_grammar(), event->type, entry.value, options));
}

bool check_on(ParseContext& ctx, const YamlNode& on, const TemplateReadOptions& options) {
    if (on.is_scalar()) {
        if (find_event(on.text) == nullptr)
            return ctx.fail(on.mark, "Unexpected value " + q(on.text));
        return true;
    }
    if (on.is_sequence()) {
        for (const auto& item : on.items) {
            if (!item.is_scalar() || find_event(item.text) == nullptr)
                return ctx.fail(item.mark,
                                "Unexpected value " + q(item.is_scalar() ? item.text : ""));
        }
        return true;
    }
    if (on.is_mapping()) {
        for (const auto& entry : on.entries) {
            if (!check_event_config(ctx, entry, options)) return false;
        }
    }
    return true;
}

// The trigger whose inputs are read: only workflow_dispatch has `choice` inputs.
enum class InputsOf { workflow_call, workflow_dispatch };

std::vector<InputSpec> parse_inputs(ParseContext& ctx, const YamlNode& node, std::string_view what,
                                    InputsOf trigger) {
    std::vector<InputSpec> out;
    if (node.is_null() || !node.is_mapping()) return out;
    for (const auto& entry : node.entries) {
        const std::string where = std::string(what) + "." + entry.key;
        InputSpec input;
        input.name = entry.key;
        input.mark = entry.key_mark;
        if (!entry.value.is_mapping()) {
            out.push_back(std::move(input));
            continue;
        }
        if (const auto* d = entry.value.find("description"))
            input.description = ctx.text(*d, where + ".description").value_or(Text{}).value;
        if (const auto* r = entry.value.find("required")) input.required = r->as_bool();
        if (const auto* d = entry.value.find("default")) input.default_value = *d;
        if (const auto* t = entry.value.find("type")) input.type = t->text;
        if (const auto* o = entry.value.find("options"); o != nullptr && !o->is_null())
            input.options = ctx.string_list(*o, where + ".options");
        if (trigger == InputsOf::workflow_dispatch && input.type == "choice" &&
            input.options.empty())
            return ctx.fail(entry.key_mark, where + ": a choice input needs 'options'"), out;
        out.push_back(std::move(input));
    }
    return out;
}

void parse_call(ParseContext& ctx, const YamlNode& node, Triggers& on) {
    if (!node.is_mapping()) return;
    if (const auto* inputs = node.find("inputs"))
        on.call_inputs =
            parse_inputs(ctx, *inputs, "on.workflow_call.inputs", InputsOf::workflow_call);
    if (const auto* secrets = node.find("secrets"); secrets && secrets->is_mapping()) {
        for (const auto& entry : secrets->entries) {
            SecretSpec secret;
            secret.name = entry.key;
            secret.mark = entry.key_mark;
            if (const auto* r = entry.value.find("required")) secret.required = r->as_bool();
            on.call_secrets.push_back(std::move(secret));
        }
    }
    if (const auto* outputs = node.find("outputs"); outputs && outputs->is_mapping()) {
        for (const auto& entry : outputs->entries) {
            const auto* value = entry.value.find("value");
            if (value == nullptr) continue;
            on.call_outputs.push_back(
                OutputSpec{entry.key, Text{value->text, value->mark}, entry.key_mark});
        }
    }
}

void add_event(Triggers& on, const std::string& event, const SourceMark& mark,
               const YamlNode* config) {
    EventTrigger trigger;
    trigger.event = event;
    trigger.mark = mark;
    if (config != nullptr && !config->is_null()) trigger.filters = *config;
    on.events.push_back(std::move(trigger));
}

Triggers parse_on(ParseContext& ctx, const YamlNode& node) {
    Triggers on;
    if (node.is_scalar()) {
        add_event(on, node.text, node.mark, nullptr);
    } else if (node.is_sequence()) {
        for (const auto& item : node.items) {
            if (on.find(item.text) == nullptr) add_event(on, item.text, item.mark, nullptr);
        }
    } else if (node.is_mapping()) {
        for (const auto& entry : node.entries) {
            add_event(on, entry.key, entry.key_mark, &entry.value);
            if (entry.key == "workflow_call") parse_call(ctx, entry.value, on);
            if (entry.key == "workflow_dispatch" && entry.value.is_mapping()) {
                if (const auto* inputs = entry.value.find("inputs"))
                    on.dispatch_inputs = parse_inputs(ctx, *inputs, "on.workflow_dispatch.inputs",
                                                      InputsOf::workflow_dispatch);
            }
        }
    }
    return on;
}

// GitHub's convertRunsOn: a literal `group` is a name, or org/NAME, organization/NAME,
// ent/NAME or enterprise/NAME.
bool check_runs_on(ParseContext& ctx, const YamlNode& runs_on) {
    const YamlNode* group = runs_on.is_mapping() ? runs_on.find("group") : nullptr;
    if (group == nullptr || !group->is_scalar() || detail::contains_expression(group->text))
        return true;
    const std::string& name = group->text;
    const auto slash = name.find('/');
    if (slash == std::string::npos) return true;
    const std::string prefix = name.substr(0, slash);
    const bool known =
        prefix == "org" || prefix == "organization" || prefix == "ent" || prefix == "enterprise";
    if (name.find('/', slash + 1) != std::string::npos || !known)
        return ctx.fail(group->mark, "Invalid runs-on group name " + q(name) +
                                         ". Please use 'organization/' or 'enterprise/' prefix to "
                                         "target a single runner group.");
    if (slash + 1 == name.size())
        return ctx.fail(group->mark, "Invalid runs-on group name " + q(name) + ".");
    return true;
}

// GitHub's convertToJobContainer: a container (or service) written out without expressions
// names an image.
bool check_container(ParseContext& ctx, const YamlNode& container) {
    if (detail::holds_expression(container) || !container.is_mapping()) return true;
    const YamlNode* image = container.find("image");
    if (image == nullptr || image->is_null() || (image->is_scalar() && image->text.empty()))
        return ctx.fail(container.mark, "Container image cannot be empty");
    return true;
}

bool check_services(ParseContext& ctx, const YamlNode& services) {
    if (!services.is_mapping()) return true;
    for (const auto& entry : services.entries) {
        if (!check_container(ctx, entry.value)) return false;
    }
    return true;
}

void parse_job_call(ParseContext& ctx, const YamlNode& node, Job& job, const std::string& where) {
    job.uses = ctx.text(*node.find("uses"), where + ".uses");
    if (job.uses && !job.uses->value.starts_with("./") &&
        job.uses->value.find('@') == std::string::npos)
        return (void)ctx.fail(job.uses->mark,
                              "Expected format {owner}/{repo}/{path}@{ref} or ./{path}. Actual " +
                                  q(job.uses->value));
    if (const auto* with = node.find("with"); with && with->is_mapping()) {
        for (const auto& entry : with->entries) job.with.emplace_back(entry.key, entry.value);
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
    if (const auto* runs_on = node.find("runs-on")) {
        job.runs_on = *runs_on;
        if (!check_runs_on(ctx, *runs_on)) return;
    }
    if (const auto* container = node.find("container")) {
        if (!check_container(ctx, *container)) return;
        job.container = *container;
    }
    if (const auto* services = node.find("services"); services && !check_services(ctx, *services))
        return;
    if (const auto* steps = node.find("steps"))
        job.steps = ctx.steps(*steps, where, detail::StepsOf::job);
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
    if (auto refused = detail::IdScope().add(entry.key))
        return ctx.fail(entry.key_mark, *refused), std::nullopt;
    if (!ctx.require_mapping(entry.value, where)) return std::nullopt;
    Job job;
    job.id = entry.key;
    job.mark = entry.key_mark;
    const YamlNode& node = entry.value;
    if (node.find("uses") != nullptr)
        parse_job_call(ctx, node, job, where);
    else
        parse_job_body(ctx, node, job, where);
    if (const auto* name = node.find("name")) job.name = ctx.text(*name, where + ".name");
    if (const auto* cond = node.find("if")) job.condition = ctx.text(*cond, where + ".if");
    if (const auto* needs = node.find("needs"))
        job.needs = ctx.string_list(*needs, where + ".needs");
    if (const auto* s = node.find("strategy")) job.strategy = ctx.strategy(*s, where);
    if (!ctx.ok()) return std::nullopt;
    return job;
}

// GitHub's ConvertToJobs: needs name jobs of the workflow (case-insensitively), some job
// needs nothing, and no cycle.
void check_needs(ParseContext& ctx, Workflow& workflow, const YamlNode& jobs_node) {
    std::map<std::string, const Job*> by_id;  // folded id
    for (const auto& job : workflow.jobs) by_id[fold_case(job.id)] = &job;
    const auto mark_of = [&](const Job& job) {
        const YamlNode* needs = jobs_node.find(job.id)->find("needs");
        return needs != nullptr ? needs->mark : job.mark;
    };
    if (std::ranges::none_of(workflow.jobs, [](const Job& job) { return job.needs.empty(); }))
        return (void)ctx.fail(jobs_node.mark,
                              "The workflow must contain at least one job with no dependencies.");
    for (auto& job : workflow.jobs) {
        for (auto& need : job.needs) {
            const auto found = by_id.find(fold_case(need));
            if (found == by_id.end())
                return (void)ctx.fail(
                    mark_of(job), "Job " + q(job.id) + " depends on unknown job " + q(need) + ".");
            need = found->second->id;  // the spelling of the job's own id, for the runner
        }
    }
    // Kahn's algorithm: what is left once every ready job is placed is a cycle.
    std::map<std::string, std::size_t> waiting;
    std::vector<const Job*> ready;
    for (const auto& job : workflow.jobs) {
        waiting[job.id] = job.needs.size();
        if (job.needs.empty()) ready.push_back(&job);
    }
    std::map<std::string, std::vector<const Job*>> dependents;
    for (const auto& job : workflow.jobs) {
        for (const auto& need : job.needs) dependents[need].push_back(&job);
    }
    while (!ready.empty()) {
        const Job* current = ready.back();
        ready.pop_back();
        for (const Job* dependent : dependents[current->id]) {
            if (--waiting[dependent->id] == 0) ready.push_back(dependent);
        }
    }
    for (const auto& job : workflow.jobs) {
        if (waiting[job.id] == 0) continue;
        for (const auto& need : job.needs) {
            if (waiting[need] != 0)
                return (void)ctx.fail(mark_of(job),
                                      "Job " + q(job.id) + " depends on job " + q(need) +
                                          " which creates a cycle in the dependency graph.");
        }
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
    std::string listed;
    for (const auto& target : targets) listed += (listed.empty() ? "" : ", ") + target.value;
    switch (kind) {
        case StepKind::wait:
            return "Wait for " + listed;
        case StepKind::wait_all:
            return "Wait for all background steps";
        case StepKind::cancel:
            return "Cancel " + listed;
        case StepKind::parallel:
            return "Parallel steps";
        case StepKind::run:
        case StepKind::uses:
            break;
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
    auto alpha = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    };
    if (!alpha(id[0])) return false;
    return std::ranges::all_of(
        id, [&](char c) { return alpha(c) || (c >= '0' && c <= '9') || c == '-'; });
}

common::Expected<Workflow> parse_workflow(std::string_view text, std::string_view file,
                                          Dialect dialect) {
    auto root = SANDGATE_TRY(parse_yaml(text, file));
    // GitHub's reading: the document against workflow-root (`on` loosely), then `on` strictly.
    static constexpr std::string_view k_act_optional[] = {"workflow-call-input-definition/type"};
    TemplateReadOptions options;
    options.condition_types = k_conditions;
    options.background_steps =
        true;  // GitHub's background steps are on: jobs run them (job_runner.hpp)
    if (dialect == Dialect::act) options.optional_properties = k_act_optional;
    SANDGATE_CHECK(read_template(workflow_grammar(), "workflow-root", root, options));
    ParseContext ctx;
    Workflow workflow;
    workflow.file = std::string(file);
    auto failed = [&]() { return common::fail(common::ErrorKind::invalid_input, ctx.error()); };
    const YamlNode* on = root.find("on");
    if (on == nullptr) return ctx.fail(root.mark, "Required property is missing: on"), failed();
    if (!check_on(ctx, *on, options)) return failed();
    workflow.on = parse_on(ctx, *on);
    if (const auto* name = root.find("name")) workflow.name = ctx.text(*name, "name");
    if (const auto* name = root.find("run-name")) workflow.run_name = ctx.text(*name, "run-name");
    if (const auto* env = root.find("env")) workflow.env = ctx.env(*env, "env");
    if (const auto* d = root.find("defaults")) workflow.defaults = ctx.defaults(*d, "defaults");
    const YamlNode* jobs_node = root.find("jobs");
    if (!ctx.ok() || jobs_node == nullptr || !ctx.require_mapping(*jobs_node, "'jobs'"))
        return failed();
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

common::Expected<Workflow> load_workflow(const std::filesystem::path& path, Dialect dialect) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return common::fail(common::ErrorKind::invalid_input,
                            one_line(path.string()) + ": cannot read the file");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return parse_workflow(buffer.str(), path.string(), dialect);
}

std::vector<std::string> topological_order(const Workflow& workflow) {
    std::vector<std::string> order;
    std::vector<bool> placed(workflow.jobs.size(), false);
    std::map<std::string, bool> done;
    bool progress = true;
    while (progress && order.size() < workflow.jobs.size()) {
        progress = false;
        for (std::size_t i = 0; i < workflow.jobs.size(); ++i) {
            if (placed[i]) continue;
            if (std::ranges::all_of(workflow.jobs[i].needs,
                                    [&](const std::string& id) { return done[id]; })) {
                order.push_back(workflow.jobs[i].id);
                done[workflow.jobs[i].id] = true;
                placed[i] = true;
                progress = true;
            }
        }
    }
    return order;
}

}  // namespace jobs
