#include "jobs/workflow/workflow_call.hpp"

#include <system_error>
#include <utility>

#include "jobs/run/run_context.hpp"
#include "jobs/workflow/yaml_value.hpp"
#include "sandbox/access/safe_read.hpp"

namespace jobs {
namespace {

constexpr std::uint64_t k_max_called_workflow_bytes = 4 * 1024 * 1024;

}  // namespace

common::Expected<Workflow> load_called_workflow(const std::filesystem::path& repository,
                                                const Job& job) {
    const std::string& uses = job.uses->value;
    if (!uses.starts_with("./"))
        return common::fail(
            common::ErrorKind::unavailable,
            located(job.uses->mark, "the remote reusable workflow '" + uses +
                                        "' is not available: sandgate runs offline"));
    const std::filesystem::path path = repository / uses.substr(2);
    // The repository is the steps' (earlier jobs of the run may have written it): read through
    // its fd, a regular file beneath it reached without a link (sandbox/access/safe_access.hpp); a
    // FIFO or a link planted there is "not a regular file", never followed or waited on.
    auto text = sandbox::read_file_beneath(repository, path,
                                           {k_max_called_workflow_bytes, std::nullopt, -1},
                                           "the called workflow '" + uses + "'");
    if (!text)
        return common::fail(common::ErrorKind::invalid_input,
                            located(job.uses->mark, text.error().message));
    auto workflow = parse_workflow(*text, path.string());
    if (!workflow) return workflow;
    workflow->file = uses.substr(2);
    if (workflow->on.find("workflow_call") == nullptr)
        return common::fail(
            common::ErrorKind::invalid_input,
            located(job.uses->mark,
                    "the workflow '" + uses + "' is not callable: its 'on' lacks workflow_call"));
    return workflow;
}

Value job_result_entry(Outcome result, const NamedValues& outputs) {
    Object values;
    for (const auto& [name, value] : outputs) values.set(name, value);
    Object entry;
    entry.set("result", std::string(to_string(result)));
    entry.set("outputs", Value(std::move(values)));
    return Value(std::move(entry));
}

common::Expected<CallArguments> call_arguments(const Job& job, const Workflow& called,
                                               const EvalContext& context,
                                               const Object& caller_secrets) {
    Object given;
    for (const auto& [name, node] : job.with) {
        auto value = evaluate_yaml(node, context);
        if (!value) return common::fail(common::ErrorKind::invalid_input, value.error().message);
        given.set(name, *value);
    }
    auto inputs = resolve_inputs(called.on.call_inputs, given, context, InputCheck::strict);
    if (!inputs)
        return common::fail(common::ErrorKind::invalid_input,
                            located(job.uses->mark, inputs.error().message));
    CallArguments arguments{std::move(*inputs), {}};
    if (job.secrets_mode == SecretsMode::inherit) arguments.secrets = caller_secrets;
    for (const auto& [name, text] : job.secrets) {
        auto value = interpolate_at(text.value, text.mark, context);
        if (!value) return common::fail(common::ErrorKind::invalid_input, value.error().message);
        arguments.secrets.set(name, *value);
    }
    for (const auto& spec : called.on.call_secrets) {
        if (spec.required && !arguments.secrets.contains(spec.name))
            return common::fail(
                common::ErrorKind::invalid_input,
                located(job.uses->mark, "the required secret '" + spec.name + "' was not passed"));
    }
    return arguments;
}

CallOutputs evaluate_call_outputs(const Workflow& called, const std::vector<JobReport>& jobs,
                                  const Object& inputs, const EvalContext& context) {
    Object results;
    for (const auto& job : jobs) results.set(job.id, job_result_entry(job.conclusion, job.outputs));
    EvalContext outputs_context = context;
    outputs_context.contexts.set("jobs", Value(std::move(results)));
    outputs_context.contexts.set("inputs", Value(inputs));
    CallOutputs out;
    for (const auto& output : called.on.call_outputs) {
        auto value = interpolate_at(output.value.value, output.value.mark, outputs_context);
        if (!value) {
            out.errors.push_back(value.error().message);
            continue;
        }
        set_named(out.values, output.name, *value);
    }
    return out;
}

}  // namespace jobs
