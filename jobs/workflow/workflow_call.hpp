#pragma once
// Calls of local reusable workflows (`jobs.<id>.uses: ./path.yml`), the parts around the
// nested run (which is run_workflow(), workflow_runner.hpp): loading the called workflow,
// the arguments the caller passes (`with:`, `secrets:`, `secrets: inherit`) checked against
// the called workflow's on.workflow_call, and its on.workflow_call.outputs evaluated over
// its jobs' results.
//
// No process runs here and nothing is logged or masked: errors are values whose messages
// the caller masks and reports (a failed call fails the calling job leg).

#include <filesystem>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "jobs/expr/expr.hpp"
#include "jobs/expr/value.hpp"
#include "jobs/run/run_report.hpp"
#include "jobs/workflow/workflow_model.hpp"

namespace jobs {

// The workflow a job calls (`uses: ./path.yml`), loaded relative to `repository` and
// checked to be callable (on: workflow_call). A remote `uses:` is unavailable (sandgate
// runs offline); a missing or uncallable file is invalid_input; both with file:line:col.
common::Expected<Workflow> load_called_workflow(const std::filesystem::path& repository,
                                                const Job& job);

// A job's result as expressions see it: {result, outputs} under needs.<id>, and under
// jobs.<id> when a called workflow's outputs are evaluated.
Value job_result_entry(Outcome result, const NamedValues& outputs);

struct CallArguments {
    Object inputs;   // the called workflow's inputs, resolved against its declarations
    Object secrets;  // what the called workflow's jobs may see
};

// The inputs (`with:`, evaluated against `context`) and secrets (`secrets:`, or all of
// `caller_secrets` with `secrets: inherit`, explicit ones replacing inherited ones) a job
// passes to `called`. Errors (invalid_input): an expression that fails, an input the
// called workflow does not declare or a required one missing, a required secret not
// passed; the last two name the `uses:` line.
common::Expected<CallArguments> call_arguments(const Job& job, const Workflow& called,
                                               const EvalContext& context,
                                               const Object& caller_secrets);

struct CallOutputs {
    NamedValues values;               // in declaration order
    std::vector<std::string> errors;  // unmasked; one per output whose expression failed
};

// `called`'s on.workflow_call.outputs, evaluated against `context` with jobs.<id> (from
// `jobs`, the nested run's job reports) and the resolved `inputs`. An output that fails to
// evaluate is left out and its error listed.
CallOutputs evaluate_call_outputs(const Workflow& called, const std::vector<JobReport>& jobs,
                                  const Object& inputs, const EvalContext& context);

}  // namespace jobs
