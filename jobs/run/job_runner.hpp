#pragma once
// Runs one job leg (a job, or one combination of its matrix) to completion: its steps in
// order with `if` (implicit success()), continue-on-error, timeout-minutes (the job's and
// each step's, enforced by the sandbox), env and defaults.run; background steps, wait,
// wait-all, cancel and parallel blocks (each background step on its own thread, its results
// applied at the wait); `uses:` of composite and JavaScript actions, local or remote (remote
// ones from the run's action store, jobs/actions/action_resolve.hpp: inputs, outputs, env
// isolation, nesting, pre/main/post with pre-if/post-if), actions/checkout and harden-runner as
// builtins; docker actions fail the step. Post steps run at the end in reverse order. Then the
// job's outputs are evaluated.
//
// Never throws; everything that goes wrong is a failed step or job in the report.

#include <filesystem>
#include <string>

#include "jobs/expr/value.hpp"
#include "jobs/run/run_context.hpp"
#include "jobs/run/run_report.hpp"
#include "jobs/workflow/workflow_model.hpp"

namespace jobs {

struct LegInput {
    const Workflow* workflow = nullptr;
    const Job* job = nullptr;
    Value matrix;      // the combination (Object), Null without a matrix
    Object strategy;   // fail-fast, job-index, job-total, max-parallel
    Object needs;      // needs.<id>.{result, outputs}
    Object inputs;     // workflow_dispatch / workflow_call inputs
    Object secrets;    // what this workflow may see
    std::string name;  // display name, evaluated
    std::filesystem::path workspace;
    std::vector<std::string> runs_on;  // evaluated labels (for the log)
    // Not owned, may be null: fired when the leg must stop (fail-fast: another leg of the
    // matrix failed). The running step is cancelled, later steps see cancelled() status
    // (only always()/cancelled() steps run, without the token), the leg concludes cancelled.
    const sandbox::CancelToken* cancel = nullptr;
};

JobReport run_job_leg(const RunSettings& settings, const RunServices& services,
                      const LegInput& leg);

}  // namespace jobs
