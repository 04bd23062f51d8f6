#include "jobs/workflow/job_legs.hpp"

#include "jobs/workflow/matrix.hpp"
#include "jobs/workflow/runner_labels.hpp"
#include "jobs/workflow/yaml_value.hpp"

namespace jobs {
namespace {

std::vector<std::string> labels_of(const Value& value) {
    std::vector<std::string> out;
    if (value.is_string())
        out.push_back(value.as_string());
    else if (value.is_array()) {
        for (const auto& item : value.as_array()) out.push_back(item.to_display_string());
    } else if (value.is_object()) {
        if (const Value* labels = value.get("labels")) return labels_of(*labels);
    }
    return out;
}

// `strategy: ${{ ... }}`: the object it evaluates to.
common::Expected<Value> computed_strategy(const Job& job, const EvalContext& context) {
    const YamlNode& node = *job.strategy->computed;
    auto value = evaluate_yaml(node, context);
    if (!value) return common::fail(common::ErrorKind::invalid_input, value.error().message);
    if (!value->is_object())
        return common::fail(common::ErrorKind::invalid_input,
                            located(node.mark, "strategy must evaluate to an object"));
    return *value;
}

// The combinations the job's matrix expands to (after --matrix filters); one empty
// combination without a matrix.
common::Expected<std::vector<Value>> matrix_combinations(const Job& job, const Value* computed,
                                                         const EvalContext& context,
                                                         const RunSettings& settings) {
    if (computed != nullptr) {
        const Value* matrix = computed->get("matrix");
        if (matrix == nullptr || matrix->is_null()) return std::vector<Value>(1);
        auto expanded = expand_matrix(*matrix);
        if (!expanded)
            return common::fail(common::ErrorKind::invalid_input,
                                located(job.strategy->computed->mark, expanded.error().message));
        return filter_matrix(std::move(*expanded), settings.matrix_filter);
    }
    if (!job.strategy || job.strategy->matrix.is_null()) return std::vector<Value>(1);
    auto matrix = evaluate_matrix(job.strategy->matrix, context);
    if (!matrix) return common::fail(common::ErrorKind::invalid_input, matrix.error().message);
    auto expanded = expand_matrix(*matrix);
    if (!expanded)
        return common::fail(common::ErrorKind::invalid_input,
                            located(job.strategy->matrix.mark, expanded.error().message));
    return filter_matrix(std::move(*expanded), settings.matrix_filter);
}

// GitHub: max-parallel 0 or less is no limit (ConvertToStrategy); the double is range-checked
// before it becomes a count.
std::size_t parallel_limit(const Value& value) {
    const double limit = value.to_number();
    return limit >= 1 && limit < 1e9 ? static_cast<std::size_t>(limit) : 0;
}

common::Expected<void> strategy_settings(const Job& job, const Value* computed,
                                         const EvalContext& context, LegPlan& plan) {
    if (computed != nullptr) {
        if (const Value* ff = computed->get("fail-fast"); ff != nullptr && !ff->is_null())
            plan.fail_fast = ff->truthy();
        if (const Value* mp = computed->get("max-parallel"); mp != nullptr && !mp->is_null())
            plan.max_parallel = parallel_limit(*mp);
        return {};
    }
    if (!job.strategy) return {};
    if (job.strategy->fail_fast) {
        auto value = evaluate_yaml(*job.strategy->fail_fast, context);
        if (!value) return common::fail(common::ErrorKind::invalid_input, value.error().message);
        plan.fail_fast = value->truthy();
    }
    if (job.strategy->max_parallel) {
        auto value = evaluate_yaml(*job.strategy->max_parallel, context);
        if (!value) return common::fail(common::ErrorKind::invalid_input, value.error().message);
        plan.max_parallel = parallel_limit(*value);
    }
    return {};
}

// The image a job's `container:` names once evaluated; "" for none (an expression that
// evaluates to an empty string or null runs the job on the runner, as on GitHub).
std::string container_image(const Value& container) {
    if (container.is_string()) return container.as_string();
    if (container.is_object()) {
        if (const Value* image = container.get("image"); image != nullptr && !image->is_null())
            return image->to_display_string();
    }
    return "";
}

std::string joined(const std::vector<std::string>& labels) {
    std::string out;
    for (const auto& label : labels) out += (out.empty() ? "" : ", ") + label;
    return out;
}

}  // namespace

EvalContext job_eval_context(const JobScope& scope, RunStatus status) {
    EvalContext context;
    const auto& workspace = scope.settings.repository;
    context.contexts.set(
        "github", Value(github_context(scope.settings, scope.workflow, scope.job.id, workspace)));
    context.contexts.set("needs", Value(scope.needs));
    context.contexts.set("vars", Value(scope.settings.vars));
    context.contexts.set("inputs", Value(scope.inputs));
    context.contexts.set("secrets", Value(scope.secrets));
    context.contexts.set("env", Value(Object{}));
    context.contexts.set("runner", Value(runner_context(scope.settings, workspace)));
    context.contexts.set("matrix", Value(Object{}));
    context.contexts.set("strategy", Value(Object{}));
    context.status = status;
    context.workspace = workspace;
    return context;
}

common::Expected<LegPlan> plan_legs(const Job& job, const EvalContext& context,
                                    const RunSettings& settings) {
    LegPlan plan;
    std::optional<Value> computed;
    if (job.strategy && job.strategy->computed) {
        auto strategy = SANDGATE_TRY(computed_strategy(job, context));
        computed = std::move(strategy);
    }
    const Value* computed_value = computed ? &*computed : nullptr;
    auto combinations = SANDGATE_TRY(matrix_combinations(job, computed_value, context, settings));
    SANDGATE_CHECK(strategy_settings(job, computed_value, context, plan));
    const std::size_t total = combinations.size();
    for (std::size_t i = 0; i < total; ++i) {
        Object strategy;
        strategy.set("fail-fast", plan.fail_fast);
        strategy.set("job-index", static_cast<double>(i));
        strategy.set("job-total", static_cast<double>(total));
        strategy.set("max-parallel",
                     static_cast<double>(plan.max_parallel == 0 ? total : plan.max_parallel));
        plan.legs.push_back(Leg{(combinations)[i], std::move(strategy)});
    }
    return plan;
}

EvalContext leg_context(const EvalContext& context, const Leg& leg) {
    EvalContext out = context;
    out.contexts.set("matrix", leg.matrix.is_null() ? Value(Object{}) : leg.matrix);
    out.contexts.set("strategy", Value(leg.strategy));
    return out;
}

std::string leg_name(const Job& job, const Leg& leg, const EvalContext& context) {
    if (job.name) {
        if (auto name = interpolate_at(job.name->value, job.name->mark, context)) return *name;
    }
    if (leg.matrix.is_null() || !leg.matrix.is_object() || leg.matrix.as_object().empty())
        return job.id;
    std::string values;
    for (const auto& [key, value] : leg.matrix.as_object()) {
        values +=
            (values.empty() ? "" : ", ") +
            (value.is_primitive() ? value.to_display_string() : to_json(value, JsonStyle::compact));
    }
    return job.id + " (" + values + ")";
}

common::Expected<LegPlacement> place_leg(const Job& job, const EvalContext& context,
                                         const RunSettings& settings) {
    LegPlacement placement;
    auto runs_on = evaluate_yaml(job.runs_on, context);
    if (!runs_on) return common::fail(common::ErrorKind::invalid_input, runs_on.error().message);
    placement.runs_on = labels_of(*runs_on);
    if (auto mismatch = platform_mismatch(placement.runs_on, settings.labels, settings.platform)) {
        placement.refusal = "runs-on [" + joined(placement.runs_on) + "]: " + *mismatch;
        return placement;
    }
    if (!labels_satisfied(placement.runs_on, settings.labels)) {
        placement.refusal = "runs-on [" + joined(placement.runs_on) +
                            "] matches none of this runner's labels (add one with --label)";
        return placement;
    }
    if (job.container) {
        auto container = evaluate_yaml(*job.container, context);
        if (!container)
            return common::fail(common::ErrorKind::invalid_input, container.error().message);
        if (const std::string image = container_image(*container); !image.empty()) {
            placement.refusal = "container: " + image +
                                ": sandgate runs a job's steps in its own sandbox on this machine, "
                                "not in a job container";
        }
    }
    return placement;
}

}  // namespace jobs
