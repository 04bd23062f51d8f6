#include "jobs/run/job_runner.hpp"

#include <algorithm>
#include <atomic>
#include <unordered_map>

#include "jobs/actions/action_resolve.hpp"
#include "jobs/run/job_steps.hpp"
#include "jobs/workflow/yaml_value.hpp"

namespace jobs {
namespace detail {

void set_env(sandbox::Environment& env, const std::string& name, const std::string& value) {
    for (auto& [key, existing] : env) {
        if (key == name) {
            existing = value;
            return;
        }
    }
    env.emplace_back(name, value);
}

void merge_env(sandbox::Environment& env, const sandbox::Environment& more) {
    if (more.empty()) return;
    if (env.size() * more.size() < 1024) {  // small: the scan is cheaper than an index
        for (const auto& [name, value] : more) set_env(env, name, value);
        return;
    }
    // Large (thousands of variables): one index, so merging stays linear.
    std::unordered_map<std::string, std::size_t> index;
    index.reserve(env.size() + more.size());
    for (std::size_t i = 0; i < env.size(); ++i) index.emplace(env[i].first, i);
    for (const auto& [name, value] : more) {
        const auto [at, added] = index.emplace(name, env.size());
        if (added)
            env.emplace_back(name, value);
        else
            env[at->second].second = value;
    }
}

Object env_object(const sandbox::Environment& env) {
    Object out;
    for (const auto& [name, value] : env) out.set(name, value);
    return out;
}

ExprExpected<sandbox::Environment> evaluate_env(const YamlNode& env, const EvalContext& context) {
    sandbox::Environment out;
    if (env.is_null()) return out;
    auto value = SANDGATE_TRY(evaluate_yaml(env, context));
    if (!value.is_object())
        return std::unexpected(ExprError{ExprError::Phase::evaluation,
                                         located(env.mark, "env must evaluate to a mapping")});
    for (const auto& [name, item] : value.as_object()) out.emplace_back(name, env_text(item));
    return out;
}

namespace {

constexpr double k_default_job_timeout_minutes = 360;
constexpr const char* k_fail_fast_message =
    "cancelled: another leg of the matrix failed (fail-fast)";
constexpr const char* k_run_cancelled_message = "cancelled: the run was cancelled";

std::optional<double> evaluate_number(const std::optional<YamlNode>& node,
                                      const EvalContext& context, std::string& error) {
    if (!node) return std::nullopt;
    auto value = evaluate_yaml(*node, context);
    if (!value) {
        error = value.error().message;
        return std::nullopt;
    }
    const double number = value->to_number();
    if (!(number > 0)) {
        error = located(node->mark, "timeout-minutes must be a positive number");
        return std::nullopt;
    }
    return number;
}

std::chrono::milliseconds minutes(double value) {
    return std::chrono::milliseconds(static_cast<long long>(value * 60'000));
}

}  // namespace

bool evaluate_flag(const std::optional<YamlNode>& node, const EvalContext& context,
                   std::string& error) {
    if (!node) return false;
    auto value = evaluate_yaml(*node, context);
    if (!value) {
        error = value.error().message;
        return false;
    }
    return value->truthy();
}

Object step_entry(const NamedValues& outputs, Outcome outcome, Outcome conclusion) {
    Object out;
    Object values;
    for (const auto& [name, value] : outputs) values.set(name, value);
    out.set("outputs", Value(std::move(values)));
    out.set("outcome", std::string(to_string(outcome)));
    out.set("conclusion", std::string(to_string(conclusion)));
    return out;
}

JobRun::JobRun(const RunSettings& settings, const RunServices& services, const LegInput& leg)
    : m_settings(settings), m_services(services), m_leg(leg) {
    m_github = github_context(settings, *leg.workflow, leg.job->id, leg.workspace);
    m_runner = runner_context(settings, leg.workspace);
    m_job_context.set("status", "success");
    m_job_context.set("container", Value(Object{}));
    m_job_context.set("services", Value(Object{}));
    m_github_env = github_environment(m_github, m_runner);
    m_label = leg.name;
    m_report.id = leg.job->id;
    m_report.name = services.masker.mask(leg.name);
    m_report.matrix = leg.matrix;
    m_deadline = std::chrono::steady_clock::now() + minutes(k_default_job_timeout_minutes);
    static std::atomic<unsigned> k_leg_counter{0};
    // --scratch DIR keeps the legs' scratches under DIR (one each: legs run in parallel).
    const std::filesystem::path scratch_root =
        settings.policy.scratch ? *settings.policy.scratch : settings.temp_root;
    m_scratch = scratch_root / ("leg-" + std::to_string(++k_leg_counter));
}

EvalContext JobRun::context(const Scope& scope, const sandbox::Environment& step_env) const {
    EvalContext context;
    Object github = m_github;
    if (!scope.action_path.empty()) github.set("action_path", scope.action_path.string());
    if (!scope.action_repository.empty()) {
        github.set("action_repository", scope.action_repository);
        github.set("action_ref", scope.action_ref);
    }
    sandbox::Environment env = m_state.env;
    merge_env(env, scope.extra_env);
    merge_env(env, step_env);
    Object job = m_job_context;
    job.set("status", std::string(status(scope) == RunStatus::success   ? "success"
                                  : status(scope) == RunStatus::failure ? "failure"
                                                                        : "cancelled"));
    context.contexts.set("github", Value(std::move(github)));
    context.contexts.set("env", Value(env_object(env)));
    context.contexts.set("vars", Value(m_settings.vars));
    if (scope.depth == 0) context.contexts.set("secrets", Value(m_leg.secrets));
    context.contexts.set("inputs", Value(scope.inputs ? *scope.inputs : m_leg.inputs));
    context.contexts.set("matrix", m_leg.matrix.is_null() ? Value(Object{}) : m_leg.matrix);
    context.contexts.set("strategy", Value(m_leg.strategy));
    context.contexts.set("needs", Value(m_leg.needs));
    context.contexts.set("steps", Value(scope.steps));
    context.contexts.set("job", Value(std::move(job)));
    context.contexts.set("runner", Value(m_runner));
    context.status = status(scope);
    context.workspace = m_leg.workspace;
    // hashFiles reads the step-writable workspace: within the job's time, and cancellable.
    context.deadline = m_deadline;
    context.cancel = cancelled() ? nullptr : m_leg.cancel;
    return context;
}

RunStatus JobRun::status(const Scope& scope) const {
    if (m_timed_out || cancelled()) return RunStatus::cancelled;
    return scope.failed ? RunStatus::failure : RunStatus::success;
}

const char* JobRun::cancel_message() const {
    const bool whole_run = m_services.cancel != nullptr && m_services.cancel->cancelled();
    return whole_run ? k_run_cancelled_message : k_fail_fast_message;
}

std::optional<std::chrono::milliseconds> JobRun::remaining() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        m_deadline - std::chrono::steady_clock::now());
    return std::max(left, std::chrono::milliseconds(1));
}

StepContext JobRun::step_context(const std::string& name) const {
    StepContext context;
    context.label = StepLabel{m_label, name};
    context.policy = m_settings.policy;
    // The workspace, or the leg's own directory holding it (runner.workspace, kept for the
    // leg: `cmake -B ../build`).
    context.policy.writable.push_back(m_services.workspace.leg_root(m_leg.workspace));
    context.policy.writable.push_back(m_settings.temp_root);
    // One kept scratch per job leg: the wrap's HOME stays the same from step to step, as a
    // runner's home does ($HOME/bin added to GITHUB_PATH must still be there).
    if (context.policy.mode != sandbox::SandboxMode::off) context.policy.scratch = m_scratch;
    // Remote actions' trees: read-only, like everything else of the action store's.
    if (m_services.actions != nullptr)
        if (auto trees = m_services.actions->trees_root(); !trees.empty()) {
            context.policy.read_only.push_back(trees);
            context.action_trees = trees;
        }
    context.temp_dir = m_settings.temp_root / "temp";
    context.temp_root = m_temp_root.get();
    context.workspace =
        m_leg.workspace;  // annotation and problem-matcher files are made relative to it
    context.masker = &m_services.masker;
    context.log = &m_services.log;
    context.host = m_settings.host;
    context.executor = m_leg_executor ? m_leg_executor.get() : m_services.executor;
    // A step that runs after the cancel (if: always() / cancelled()) runs to its end.
    context.cancel = cancelled()                ? nullptr
                     : m_step_cancel != nullptr ? m_step_cancel
                                                : m_leg.cancel;
    return context;
}

void JobRun::fail_step(StepReport& report, const std::string& message) {
    report.outcome = Outcome::failure;
    report.conclusion = Outcome::failure;
    report.message = m_services.masker.mask(message);
    Annotation annotation;
    annotation.level = AnnotationLevel::error;
    annotation.message = report.message;
    report.annotations.push_back(annotation);
    m_services.log.annotation(StepLabel{m_label, report.name}, annotation);
    log_finish(report);
}

StepResult JobRun::execute(StepSpec spec, const std::string& name, StepReport& report) {
    const auto left = remaining();
    if (left) spec.timeout = spec.timeout ? std::min(*spec.timeout, *left) : *left;
    spec.continue_on_error = m_continue;
    StepResult result = run_step(spec, step_context(name), m_state);
    report.outcome = result.outcome;
    report.conclusion = result.conclusion;
    report.exit_code = result.exit_code;
    report.duration += result.duration;
    report.stdout_bytes += result.stdout_bytes;
    report.stderr_bytes += result.stderr_bytes;
    report.truncated = report.truncated || result.truncated;
    report.timed_out = result.timed_out;
    report.skip_markers += result.skip_markers;
    if (result.egress) {
        if (!report.egress) report.egress.emplace();
        auto& connections = report.egress->connections;
        connections.insert(connections.end(), result.egress->connections.begin(),
                           result.egress->connections.end());
        report.egress->unrecorded += result.egress->unrecorded;
    }
    for (auto& annotation : result.annotations) report.annotations.push_back(annotation);
    if (!result.error.empty()) report.message = result.error;
    report.summary += result.summary;
    if (result.timed_out && std::chrono::steady_clock::now() >= m_deadline) {
        m_timed_out = true;
        report.message = "the job exceeded its timeout-minutes";
    }
    return result;
}

void JobRun::run_steps(const std::vector<Step>& steps, Scope& scope, std::vector<StepReport>& out) {
    for (const auto& step : steps) {
        if (step.kind == StepKind::run || step.kind == StepKind::uses)
            run_listed(step, scope, out);
        else
            run_control(step, scope, out);
    }
}

void JobRun::run_listed(const Step& step, Scope& scope, std::vector<StepReport>& out) {
    StepReport report;
    report.id = step.id ? *step.id : "__step_" + std::to_string(step.index + 1);
    if (!step.id && step.block)
        report.id =
            "__step_" + std::to_string(*step.block + 1) + "_" + std::to_string(step.index + 1);
    if (scope.depth > 0 && !step.id)
        report.id = "__" + scope.action_name + "_" + std::to_string(step.index + 1);
    EvalContext ctx = context(scope);
    report.name = step.display_name();
    if (step.name) {
        if (auto name = interpolate_at(step.name->value, step.name->mark, ctx)) report.name = *name;
    }
    report.name = m_services.masker.mask(report.name);
    const StepLabel label{m_label, report.name};
    const std::string condition = step.condition ? step.condition->value : "success()";
    auto run_it = condition_at(condition, step.condition ? step.condition->mark : step.mark, ctx);
    if (!run_it) {
        fail_step(report, "if: " + run_it.error().message);
    } else if (!*run_it) {
        report.outcome = report.conclusion = Outcome::skipped;
        m_services.log.status(label, StatusKind::skipped, report.name);
    } else if (step.background && scope.depth == 0) {
        return start_background(step, scope, ctx, std::move(report), out);
    } else {
        run_one(step, scope, ctx, report);
    }
    record(std::move(report), scope, out);
}

void JobRun::record(StepReport report, Scope& scope, std::vector<StepReport>& out) {
    scope.steps.set(report.id,
                    Value(step_entry(report.outputs, report.outcome, report.conclusion)));
    if (report.conclusion == Outcome::failure) scope.failed = true;
    out.push_back(std::move(report));
}

void JobRun::run_one(const Step& step, Scope& scope, const EvalContext& ctx, StepReport& report) {
    std::string error;
    auto step_env = evaluate_env(step.env, ctx);
    if (!step_env) return fail_step(report, step_env.error().message);
    EvalContext step_ctx = context(scope, *step_env);
    const bool may_fail = evaluate_flag(step.continue_on_error, step_ctx, error);
    const auto timeout_minutes = evaluate_number(step.timeout_minutes, step_ctx, error);
    if (!error.empty()) return fail_step(report, error);
    std::optional<std::chrono::milliseconds> timeout;
    if (timeout_minutes) timeout = minutes(*timeout_minutes);
    // The step's own expressions (hashFiles in its run: or with:) count against its time too.
    if (timeout && step_ctx.deadline)
        step_ctx.deadline =
            std::min(*step_ctx.deadline, std::chrono::steady_clock::now() + *timeout);
    m_continue = may_fail ? ContinueOnError::yes : ContinueOnError::no;
    if (step.run)
        run_script(step, scope, step_ctx, *step_env, timeout, report);
    else
        run_uses(step, scope, step_ctx, *step_env, timeout, report);
    m_continue = ContinueOnError::no;
    if (report.timed_out && !m_timed_out) report.message = "the step exceeded its timeout-minutes";
    if (report.outcome == Outcome::failure && may_fail) report.conclusion = Outcome::success;
}

void JobRun::log_start(const StepReport& report) {
    m_services.log.status(StepLabel{m_label, report.name}, StatusKind::start, "Run " + report.name);
}

void JobRun::log_finish(const StepReport& report) {
    const StepLabel label{m_label, report.name};
    if (report.outcome == Outcome::success)
        m_services.log.status(label, StatusKind::success, "Success - " + report.name);
    else if (report.outcome == Outcome::cancelled)
        m_services.log.status(label, StatusKind::cancelled, "Cancelled - " + report.name);
    else if (m_continue == ContinueOnError::yes)
        m_services.log.status(label, StatusKind::failure,
                              "Failure - " + report.name + " (continue-on-error)");
    else
        m_services.log.status(label, StatusKind::failure, "Failure - " + report.name);
}

sandbox::Environment JobRun::process_env(const Scope& scope, const sandbox::Environment& step_env,
                                         const std::string& action_id) const {
    sandbox::Environment env = m_github_env;
    if (!scope.action_path.empty()) set_env(env, "GITHUB_ACTION_PATH", scope.action_path.string());
    if (!scope.action_repository.empty()) {
        set_env(env, "GITHUB_ACTION_REPOSITORY", scope.action_repository);
        set_env(env, "GITHUB_ACTION_REF", scope.action_ref);
    }
    set_env(env, "GITHUB_ACTION", action_id);
    merge_env(env, scope.extra_env);
    merge_env(env, step_env);
    return env;
}

void JobRun::run_script(const Step& step, Scope& scope, const EvalContext& ctx,
                        const sandbox::Environment& step_env,
                        std::optional<std::chrono::milliseconds> timeout, StepReport& report) {
    auto script = interpolate_at(step.run->value, step.run->mark, ctx);
    if (!script) return fail_step(report, script.error().message);
    StepSpec spec;
    spec.id = report.id;
    spec.script = *script;
    const RunDefaults* defaults = scope.defaults;
    const Text* shell = step.shell                    ? &*step.shell
                        : defaults && defaults->shell ? &*defaults->shell
                                                      : nullptr;
    if (shell != nullptr) {
        auto value = interpolate_at(shell->value, shell->mark, ctx);
        if (!value) return fail_step(report, value.error().message);
        spec.shell = *value;
    }
    const Text* dir = step.working_directory                    ? &*step.working_directory
                      : defaults && defaults->working_directory ? &*defaults->working_directory
                                                                : nullptr;
    spec.working_directory = m_leg.workspace;
    if (dir != nullptr) {
        auto value = interpolate_at(dir->value, dir->mark, ctx);
        if (!value) return fail_step(report, value.error().message);
        spec.working_directory = m_leg.workspace / *value;  // an absolute path replaces it
    }
    spec.env = process_env(scope, step_env, report.id);
    spec.timeout = timeout;
    StepResult result = execute(std::move(spec), report.name, report);
    report.outputs = result.outputs;
}

void JobRun::warn(StepReport& report, const std::string& message) {
    Annotation annotation;
    annotation.level = AnnotationLevel::warning;
    annotation.message = m_services.masker.mask(message);
    report.annotations.push_back(annotation);
    m_services.log.annotation(StepLabel{m_label, report.name}, annotation);
}

void JobRun::run_posts() {
    for (auto it = m_posts.rbegin(); it != m_posts.rend(); ++it) {
        PostStep& post = *it;
        StepReport report;
        report.id = post.id;
        report.name = post.name;
        report.stage = StepStage::post;
        Scope scope = post.scope;
        scope.failed =
            m_report.steps.end() != std::ranges::find_if(m_report.steps, [](const StepReport& s) {
                return s.conclusion == Outcome::failure;
            });
        const EvalContext ctx = context(scope);
        // actions/cache's save runs as its action.yml says: post-if success().
        const std::string condition = post.builtin != BuiltinAction::none ? "success()"
                                      : post.action.post_if ? post.action.post_if->value
                                                            : "always()";
        auto run_it = condition_at(
            condition, post.action.post_if ? post.action.post_if->mark : SourceMark{}, ctx);
        const StepLabel label{m_label, report.name};
        if (!run_it) {
            fail_step(report, "post-if: " + run_it.error().message);
        } else if (!*run_it) {
            report.outcome = report.conclusion = Outcome::skipped;
            m_services.log.status(label, StatusKind::skipped, report.name);
        } else if (post.builtin != BuiltinAction::none) {
            log_start(report);
            run_cache_save(post.state, report);
        } else {
            StepSpec spec;
            spec.id = post.id;
            spec.argv = {m_settings.node, (post.action.directory / post.action.post).string()};
            spec.env = post.env;
            merge_env(spec.env, state_environment(post.state));
            spec.working_directory = m_leg.workspace;
            execute(std::move(spec), report.name, report);
        }
        m_report.steps.push_back(std::move(report));
    }
}

void JobRun::evaluate_outputs() {
    Scope scope;
    scope.steps = m_job_steps;
    const EvalContext ctx = context(scope);
    for (const auto& [name, text] : m_leg.job->outputs) {
        auto value = interpolate_at(text.value, text.mark, ctx);
        if (!value) {
            m_report.annotations.push_back(
                Annotation{.level = AnnotationLevel::warning,
                           .message = m_services.masker.mask(value.error().message)});
            continue;
        }
        if (m_services.masker.contains_secret(*value)) {
            m_report.annotations.push_back(
                Annotation{.level = AnnotationLevel::warning,
                           .message = "Skip output '" + name + "' since it may contain secret."});
            continue;
        }
        set_named(m_report.outputs, name, *value);
    }
}

RunDefaults JobRun::job_defaults() const {
    RunDefaults defaults = m_leg.job->defaults;
    if (!defaults.shell) defaults.shell = m_leg.workflow->defaults.shell;
    if (!defaults.working_directory)
        defaults.working_directory = m_leg.workflow->defaults.working_directory;
    return defaults;
}

std::optional<std::string> JobRun::set_up(const Scope& scope) {
    merge_env(m_state.env, m_settings.env);
    // The workflow env sees no env of its own; the job env sees the workflow's.
    auto workflow_env = evaluate_env(m_leg.workflow->env, context(scope));
    if (!workflow_env) return workflow_env.error().message;
    merge_env(m_state.env, *workflow_env);
    auto job_env = evaluate_env(m_leg.job->env, context(scope));
    if (!job_env) return job_env.error().message;
    merge_env(m_state.env, *job_env);
    std::string error;
    const auto timeout = evaluate_number(m_leg.job->timeout_minutes, context(scope), error);
    if (!error.empty()) return error;
    if (timeout) m_deadline = m_started + minutes(*timeout);
    if (m_leg.job->steps.empty()) return "the job has no steps";
    return std::nullopt;
}

Outcome JobRun::steps_outcome() {
    const bool failed = std::ranges::any_of(
        m_report.steps, [](const StepReport& s) { return s.conclusion == Outcome::failure; });
    if (m_timed_out) {
        m_report.message = "the job exceeded its timeout-minutes";
        return Outcome::failure;
    }
    if (cancelled()) {
        m_report.message = cancel_message();
        return failed ? Outcome::failure : Outcome::cancelled;
    }
    return failed ? Outcome::failure : Outcome::success;
}

JobReport JobRun::finish(Outcome outcome, const Scope& scope) {
    m_report.outcome = outcome;
    m_report.conclusion = outcome;
    std::string error;  // a continue-on-error that fails to evaluate counts as false
    if (outcome == Outcome::failure &&
        evaluate_flag(m_leg.job->continue_on_error, context(scope), error))
        m_report.conclusion = Outcome::success;
    m_report.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - m_started);
    m_services.log.status(StepLabel{m_label, ""},
                          m_report.conclusion == Outcome::success     ? StatusKind::success
                          : m_report.conclusion == Outcome::cancelled ? StatusKind::cancelled
                                                                      : StatusKind::failure,
                          "job " + m_report.name + " " + std::string(to_string(m_report.outcome)));
    return m_report;
}

JobReport JobRun::fail_job(const std::string& message, const Scope& scope) {
    m_report.message = m_services.masker.mask(message);
    Annotation annotation{AnnotationLevel::error, m_report.message, std::nullopt,
                          std::nullopt,           std::nullopt,     std::nullopt,
                          std::nullopt,           std::nullopt,     std::nullopt};
    m_report.annotations.push_back(annotation);
    m_services.log.annotation(StepLabel{m_label, ""}, annotation);
    return finish(Outcome::failure, scope);
}

JobReport JobRun::run() {
    m_started = std::chrono::steady_clock::now();
    m_services.log.status(StepLabel{m_label, ""}, StatusKind::start, "job " + m_report.name);
    if (m_services.observer != nullptr) m_services.observer->job_started(*m_leg.workflow, m_report);
    Scope scope;
    const RunDefaults defaults = job_defaults();
    scope.defaults = &defaults;
    if (auto error = set_up(scope)) return fail_job(*error, scope);
    if (cancelled()) {
        m_report.message = cancel_message();
        return finish(Outcome::cancelled, scope);
    }
    // RUNNER_TEMP's parent, held from before the first step on: the steps reach RUNNER_TEMP
    // beneath this descriptor whatever they do to the path.
    m_temp_root = m_settings.temp_root_dir;
    if (!m_temp_root) {
        auto opened =
            sandbox::SafeDir::open_trusted(m_settings.temp_root, "the runner's temp root");
        if (!opened) return fail_job(opened.error().message, scope);
        m_temp_root = std::make_shared<const sandbox::SafeDir>(std::move(*opened));
    }
    if (m_services.leg_executors != nullptr)
        m_leg_executor = m_services.leg_executors->open_leg(
            m_label, m_services.workspace.leg_root(m_leg.workspace));
    run_steps(m_leg.job->steps, scope, m_report.steps);
    // Background steps still running are waited for (GitHub's runner does the same before
    // the post steps); a cancelled job's token has already stopped them.
    join_all_background(scope, m_report.steps);
    m_job_steps = scope.steps;
    run_posts();
    m_leg_executor.reset();  // the leg's sandbox ends with its last step
    evaluate_outputs();
    return finish(steps_outcome(), scope);
}

}  // namespace detail

JobReport run_job_leg(const RunSettings& settings, const RunServices& services,
                      const LegInput& leg) {
    detail::JobRun run(settings, services, leg);
    return run.run();
}

}  // namespace jobs
