#pragma once
// A job's legs before any runs: the combinations its strategy expands to (after `exclude`,
// `include` and --matrix), the strategy context of each, the leg's display name, and where
// it may run (runs-on against this runner's labels and platform, `container:`). Shared by the
// workflow runner and `sandgate run -l`, so that the listing says what a run does.
//
// Pure functions of the job, the settings and an evaluation context: no I/O, never throw.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "jobs/expr/expr.hpp"
#include "jobs/expr/value.hpp"
#include "jobs/run/run_context.hpp"
#include "jobs/workflow/workflow_model.hpp"

namespace jobs {

// What a job's `if`, strategy, runs-on and name are evaluated against.
struct JobScope {
    const RunSettings& settings;
    const Workflow& workflow;
    const Job& job;
    const Object& needs;    // the needs context
    const Object& inputs;   // the workflow's inputs
    const Object& secrets;  // the workflow's secrets
};

// The context of a job's `if` and strategy: github (the workspace: the repository
// directory), needs, vars, inputs, secrets, runner, and empty env, matrix and strategy;
// `status` for the status functions.
EvalContext job_eval_context(const JobScope& scope, RunStatus status);

struct Leg {
    Value matrix;     // the combination; Null without a matrix
    Object strategy;  // fail-fast, job-index, job-total, max-parallel
};

struct LegPlan {
    std::vector<Leg> legs;
    std::size_t max_parallel = 0;  // 0: no limit
    bool fail_fast = true;
};

// The legs of `job` (one without a matrix; none when --matrix filters out every one).
// Errors (invalid_input, file:line:col): a strategy or matrix that does not evaluate or expand.
common::Expected<LegPlan> plan_legs(const Job& job, const EvalContext& context,
                                    const RunSettings& settings);

// `context` with the leg's matrix and strategy contexts.
EvalContext leg_context(const EvalContext& context, const Leg& leg);

// The leg's display name: the job's `name:` evaluated (against leg_context), else the id
// followed by the matrix values ("test (linux, 3)").
std::string leg_name(const Job& job, const Leg& leg, const EvalContext& context);

struct LegPlacement {
    std::vector<std::string> runs_on;  // the labels runs-on evaluated to
    // Why the leg does not run here: runs-on names another OS or architecture, or matches
    // none of the labels, or the job asks for a `container:` (sandgate runs steps in its own
    // sandbox, not in a job container). nullopt: it runs.
    std::optional<std::string> refusal;
};

// Where the leg (context: leg_context) may run. Errors: runs-on or container that does not
// evaluate.
common::Expected<LegPlacement> place_leg(const Job& job, const EvalContext& context,
                                         const RunSettings& settings);

}  // namespace jobs
