#pragma once
// Runs workflows: jobs as a DAG over `needs` (a job starts once everything it needs has
// finished; independent jobs run in parallel, at most RunServices::legs job legs at once),
// each job's `if` with the implicit success() over all its ancestors (a skipped ancestor
// skips it too unless its `if` calls a status function: RunStatus, jobs/expr/expr.hpp), its
// matrix legs (fail-fast, max-parallel, --matrix filters), runs-on against the runner's
// labels (no match: the leg is skipped with a notice), and jobs that call local reusable
// workflows (inputs, secrets incl. inherit, outputs: see workflow_call.hpp; nested up to
// k_max_workflow_depth).
//
// Never throws; a problem found while running (an expression that fails, a missing called
// workflow) fails the job, and the run goes on as GitHub's would.

#include <vector>

#include "jobs/run/run_context.hpp"
#include "jobs/run/run_report.hpp"
#include "jobs/workflow/workflow_model.hpp"

namespace jobs {

inline constexpr int k_max_workflow_depth = 4;

// Runs one workflow. `inputs` and `secrets` are what its jobs see (for workflow_dispatch:
// the resolved inputs; for a call: the caller's). `depth` is 0 for a top-level workflow.
WorkflowReport run_workflow(const RunSettings& settings, const RunServices& services,
                            const Workflow& workflow, const Object& inputs, const Object& secrets,
                            int depth = 0);

}  // namespace jobs
