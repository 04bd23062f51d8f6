// `uses:` steps of a job leg: local and remote (resolved, jobs/actions/action_resolve.hpp)
// composite and JavaScript actions, the builtins (actions/checkout here, the cache and artifact
// ones in step_builtins.cpp and step_artifacts.cpp), and the refusal of containers.
#include <algorithm>

#include "jobs/actions/action_resolve.hpp"
#include "jobs/run/job_steps.hpp"
#include "jobs/workflow/yaml_value.hpp"

namespace jobs::detail {
namespace {

std::string id_part(const std::string& path) {
    std::string out;
    for (char c : path) out += (std::isalnum(static_cast<unsigned char>(c)) != 0) ? c : '_';
    return out;
}

}  // namespace

NamedValues JobRun::action_inputs(const Action& action, const NamedValues& with,
                                  const EvalContext& ctx, StepReport& report) {
    NamedValues out;
    for (const auto& spec : action.inputs) {
        auto given = std::ranges::find_if(
            with, [&](const auto& pair) { return equals_ignore_case(pair.first, spec.name); });
        if (given != with.end()) {
            out.emplace_back(spec.name, given->second);
        } else if (spec.default_value) {
            auto value = evaluate_yaml(*spec.default_value, ctx);
            if (!value) {
                warn(report, value.error().message);
                out.emplace_back(spec.name, "");
            } else {
                out.emplace_back(spec.name, env_text(*value));
            }
        } else {
            if (spec.required) warn(report, "Input required and not supplied: " + spec.name);
            out.emplace_back(spec.name, "");
        }
    }
    std::vector<std::string> unexpected;
    for (const auto& [name, value] : with) {
        const bool known = std::ranges::any_of(action.inputs, [&](const InputSpec& spec) {
            return equals_ignore_case(spec.name, name);
        });
        if (!known) {
            unexpected.push_back(name);
            out.emplace_back(name, value);
        }
    }
    if (!unexpected.empty()) {
        std::string list;
        for (const auto& name : unexpected) list += (list.empty() ? "'" : ", '") + name + "'";
        warn(report, "Unexpected input(s) " + list + " for the action " + action.file);
    }
    return out;
}

void JobRun::run_uses(const Step& step, Scope& scope, const EvalContext& ctx,
                      const sandbox::Environment& step_env,
                      std::optional<std::chrono::milliseconds> timeout, StepReport& report) {
    const std::string& uses = step.uses->value;
    NamedValues with;
    if (step.with_template) {  // `${{ insert }}` or computed keys: the whole mapping evaluated
        auto value = evaluate_yaml(*step.with_template, ctx);
        if (!value) return fail_step(report, value.error().message);
        if (!value->is_object())
            return fail_step(
                report, located(step.with_template->mark, "'with' must evaluate to a mapping"));
        for (const auto& [name, item] : value->as_object())
            with.emplace_back(name, item.to_display_string());
    }
    for (const auto& [name, text] : step.with) {
        auto value = interpolate_at(text.value, text.mark, ctx);
        if (!value) return fail_step(report, value.error().message);
        with.emplace_back(name, *value);
    }
    if (uses.starts_with("./") || uses == ".") {
        // The workspace is the steps': the manifest is read beneath its fd (action_model.hpp).
        const std::filesystem::path dir = (m_leg.workspace / uses).lexically_normal();
        auto action = load_action(m_leg.workspace, dir);
        if (!action) return fail_step(report, action.error().message);
        return run_action(*action, with, step, scope, ctx, step_env, timeout, report);
    }
    if (uses.starts_with("docker://"))
        return fail_step(
            report,
            "'" + uses +
                "' is a container image: sandgate runs steps in its sandbox, not in containers");
    switch (builtin_action(uses)) {
        case BuiltinAction::checkout:
            return run_checkout(with, report);
        case BuiltinAction::wrap_does_it:
            return run_wrap_does_it(uses, report);
        case BuiltinAction::cache:
        case BuiltinAction::cache_restore:
            return run_cache_restore(builtin_action(uses), uses, with, scope, report);
        case BuiltinAction::cache_save:
            log_start(report);
            return run_cache_save(with, report);
        case BuiltinAction::upload_artifact:
            return run_upload_artifact(with, report);
        case BuiltinAction::download_artifact:
            return run_download_artifact(with, report);
        case BuiltinAction::none:
            break;
    }
    run_remote(step, with, scope, ctx, step_env, timeout, report);
}

void JobRun::run_remote(const Step& step, const NamedValues& with, Scope& scope,
                        const EvalContext& ctx, const sandbox::Environment& step_env,
                        std::optional<std::chrono::milliseconds> timeout, StepReport& report) {
    const std::string& uses = step.uses->value;
    if (m_services.actions == nullptr)
        return fail_step(report, "the remote action '" + uses +
                                     "' is not available: this run has no action store");
    // Resolved before the job started (or now, for one only met at run time); the tree is
    // the store's, read-only, and bound read-only into the step's sandbox.
    const LockedAction locked = m_services.actions->get(uses);
    if (!locked.error.empty()) return fail_step(report, locked.error);
    auto action = load_action(locked.tree, locked.directory);
    if (!action) return fail_step(report, action.error().message);
    action->repository = locked.ref.repository();
    action->ref = locked.ref.ref;
    run_action(*action, with, step, scope, ctx, step_env, timeout, report);
}

void JobRun::run_action(const Action& action, const NamedValues& with, const Step& step,
                        Scope& scope, const EvalContext& ctx, const sandbox::Environment& step_env,
                        std::optional<std::chrono::milliseconds> timeout, StepReport& report) {
    NamedValues inputs = action_inputs(action, with, ctx, report);
    switch (action.kind) {
        case ActionKind::composite:
            return run_composite(action, inputs, step, scope, step_env, report);
        case ActionKind::node:
            return run_node(action, inputs, step, scope, step_env, timeout, report);
        case ActionKind::docker:
            return fail_step(report, "the docker action " + step.uses->value + " (" + action.file +
                                         ": runs.using: docker) cannot run: sandgate runs steps in "
                                         "its sandbox, not in containers");
    }
}

void JobRun::run_wrap_does_it(const std::string& uses, StepReport& report) {
    log_start(report);
    m_services.log.output(
        StepLabel{m_label, report.name},
        "sandgate: " + uses.substr(0, uses.find('@')) +
            " does nothing here: every step already runs in sandgate's wrap, whose network is "
            "loopback only or an allowlist its own proxy enforces and records");
    report.outcome = report.conclusion = Outcome::success;
    log_finish(report);
}

void JobRun::run_checkout(const NamedValues& with, StepReport& report) {
    CheckoutRequest request;
    if (const auto* repository = find_named(with, "repository")) request.repository = *repository;
    if (const auto* ref = find_named(with, "ref")) request.ref = *ref;
    if (const auto* path = find_named(with, "path")) request.path = *path;
    if (const auto* depth = find_named(with, "fetch-depth")) request.fetch_depth = *depth;
    if (const auto* submodules = find_named(with, "submodules")) request.submodules = *submodules;
    const Value* own = m_github.find("repository");
    if (own != nullptr && equals_ignore_case(request.repository, own->to_display_string()))
        request.repository.clear();
    log_start(report);
    const auto started = std::chrono::steady_clock::now();
    auto result = m_services.workspace.checkout(m_leg.workspace, request);
    report.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started);
    if (!result) return fail_step(report, result.error().message);
    m_services.log.output(StepLabel{m_label, report.name}, m_services.masker.mask(*result));
    report.outcome = report.conclusion = Outcome::success;
    log_finish(report);
}

void JobRun::run_composite(const Action& action, const NamedValues& inputs, const Step& step,
                           Scope& scope, const sandbox::Environment& step_env, StepReport& report) {
    if (scope.depth >= k_max_composite_depth)
        return fail_step(report, "composite actions nest deeper than " +
                                     std::to_string(k_max_composite_depth) + " levels");
    Scope inner;
    Object inputs_object;
    for (const auto& [name, value] : inputs) inputs_object.set(name, value);
    inner.inputs = std::move(inputs_object);
    inner.extra_env = scope.extra_env;
    merge_env(inner.extra_env, step_env);
    inner.action_path = action.directory;
    inner.action_repository = action.repository;
    inner.action_ref = action.ref;
    inner.action_name = id_part(step.uses->value);
    inner.depth = scope.depth + 1;
    log_start(report);
    const auto started = std::chrono::steady_clock::now();
    run_steps(action.steps, inner, report.steps);
    report.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started);
    for (const auto& inner_step : report.steps) {
        report.stdout_bytes += inner_step.stdout_bytes;
        report.stderr_bytes += inner_step.stderr_bytes;
        report.truncated = report.truncated || inner_step.truncated;
        report.skip_markers += inner_step.skip_markers;
        report.timed_out = report.timed_out || inner_step.timed_out;
    }
    const EvalContext ctx = context(inner);
    for (const auto& output : action.outputs) {
        auto value = interpolate_at(output.value.value, output.value.mark, ctx);
        if (!value) {
            warn(report, value.error().message);
            continue;
        }
        set_named(report.outputs, output.name, *value);
    }
    report.outcome = report.conclusion = inner.failed ? Outcome::failure : Outcome::success;
    log_finish(report);
}

void JobRun::run_node(const Action& action, const NamedValues& inputs, const Step& step,
                      Scope& scope, const sandbox::Environment& step_env,
                      std::optional<std::chrono::milliseconds> timeout, StepReport& report) {
    Scope action_scope = scope;
    action_scope.action_path = action.directory;
    action_scope.action_repository = action.repository;
    action_scope.action_ref = action.ref;
    sandbox::Environment env = process_env(action_scope, step_env, report.id);
    merge_env(env, input_environment(inputs));
    NamedValues state;
    auto spec_for = [&](const std::string& script) {
        StepSpec spec;
        spec.id = report.id;
        spec.argv = {m_settings.node, (action.directory / script).string()};
        spec.env = env;
        merge_env(spec.env, state_environment(state));
        spec.working_directory = m_leg.workspace;
        spec.timeout = timeout;
        return spec;
    };
    if (!action.pre.empty()) {
        StepReport pre;
        pre.id = report.id;
        pre.name = "Pre " + report.name;
        pre.stage = StepStage::pre;
        const EvalContext ctx = context(scope);
        auto run_it = condition_at(action.pre_if ? action.pre_if->value : "always()",
                                   action.pre_if ? action.pre_if->mark : step.mark, ctx);
        if (!run_it) {
            fail_step(pre, "pre-if: " + run_it.error().message);
        } else if (*run_it) {
            StepResult result = execute(spec_for(action.pre), pre.name, pre);
            for (const auto& [name, value] : result.state) set_named(state, name, value);
        } else {
            pre.outcome = pre.conclusion = Outcome::skipped;
        }
        const bool pre_failed = pre.conclusion == Outcome::failure;
        report.steps.push_back(std::move(pre));
        if (pre_failed) return fail_step(report, "the action's pre step failed");
    }
    StepResult result = execute(spec_for(action.main), report.name, report);
    report.outputs = result.outputs;
    for (const auto& [name, value] : result.state) set_named(state, name, value);
    if (!action.post.empty()) {
        PostStep post{action, env, state, "Post " + report.name, report.id, scope};
        m_posts.push_back(std::move(post));
    }
}

}  // namespace jobs::detail
