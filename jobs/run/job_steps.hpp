#pragma once
// Internal to job_runner.cpp and step_actions.cpp: the state of one running job leg.

#include <chrono>
#include <memory>
#include <optional>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include "jobs/actions/action_resolve.hpp"
#include "jobs/expr/expr.hpp"
#include "jobs/run/job_runner.hpp"
#include "jobs/run/step_runner.hpp"
#include "jobs/workflow/action_model.hpp"
#include "sandbox/process/cancel.hpp"

namespace jobs {
struct CacheEntry;  // jobs/builtins/cache_store.hpp
}  // namespace jobs

namespace jobs::detail {

inline constexpr int k_max_composite_depth = 9;
// Background steps running at once in a job, as GitHub's runner allows; more wait for a slot.
inline constexpr std::ptrdiff_t k_max_running_background = 10;
using BackgroundSlots = std::counting_semaphore<k_max_running_background>;

// The steps of a job or of a composite action run in a scope: its own steps context and
// inputs, the env its caller passed (not leaking out), its status functions.
struct Scope {
    Object steps;
    std::optional<Object> inputs;       // composite: its inputs
    sandbox::Environment extra_env;     // env of the `uses:` step(s) that led here
    std::filesystem::path action_path;  // composite: GITHUB_ACTION_PATH
    std::string action_name;            // composite: for labels
    std::string action_repository;      // remote action: GITHUB_ACTION_REPOSITORY (OWNER/REPO)
    std::string action_ref;             // remote action: GITHUB_ACTION_REF
    bool failed = false;                // a step concluded failure
    int depth = 0;
    const RunDefaults* defaults = nullptr;  // job scope only
};

struct PostStep {
    Action action;
    sandbox::Environment env;  // INPUT_*, GITHUB_ACTION_PATH, the caller env
    NamedValues state;
    std::string name;
    std::string id;
    Scope scope;  // as it was when the main step ran
    // actions/cache: its save, with post-if success(); `state` holds its inputs.
    BuiltinAction builtin = BuiltinAction::none;
};

struct BackgroundStep;

// The background steps a job run started (background_steps.cpp), touched on the job's thread
// only. A copy is empty: the fork a background step runs in starts none of its own. The
// destructor cancels and joins any still running (run() has joined them all before).
class BackgroundSteps {
public:
    BackgroundSteps();
    BackgroundSteps(const BackgroundSteps&);
    BackgroundSteps& operator=(const BackgroundSteps&) = delete;
    ~BackgroundSteps();

    std::vector<std::unique_ptr<BackgroundStep>> items;  // in start order
};

// A JobRun is copied (a fork) for each background step: the fork runs the step on its own
// thread with its own JobState, posts, timeout flag and continue-on-error, sharing only what
// is immutable or thread-safe (settings, leg, services: log, masker, executor). The job's
// thread applies the fork's results at the wait (join_background).
class JobRun {
public:
    JobRun(const RunSettings& settings, const RunServices& services, const LegInput& leg);
    JobReport run();

    // run()'s parts. The job's defaults.run over the workflow's.
    RunDefaults job_defaults() const;
    // The job's env (--env, the workflow's, the job's) and timeout-minutes; the error the
    // job fails with, if any.
    std::optional<std::string> set_up(const Scope& scope);
    // The job's outcome once its steps ran; sets the report's message when it timed out or
    // was cancelled.
    Outcome steps_outcome();
    // Concludes the report (continue-on-error, duration) and logs the job's end.
    JobReport finish(Outcome outcome, const Scope& scope);
    // Fails the job before its steps ran, with an error annotation.
    JobReport fail_job(const std::string& message, const Scope& scope);

    // Runs `steps` in `scope`, appending their reports.
    void run_steps(const std::vector<Step>& steps, Scope& scope, std::vector<StepReport>& out);
    // One run or uses step: its `if`, then run_one, or start_background for a background step.
    void run_listed(const Step& step, Scope& scope, std::vector<StepReport>& out);
    // The step's report joins the job: steps.<id>, the scope's failure, the report list.
    void record(StepReport report, Scope& scope, std::vector<StepReport>& out);

    // Background steps (background_steps.cpp), job scope only. The report's slot in `out` is
    // kept at the step's place; steps.<id>, outputs, env, path and matchers join the job when
    // it is waited for (wait, wait-all, cancel, the end of a parallel block, the job's end).
    void start_background(const Step& step, Scope& scope, const EvalContext& ctx, StepReport report,
                          std::vector<StepReport>& out);
    // wait, wait-all, cancel and parallel steps.
    void run_control(const Step& step, Scope& scope, std::vector<StepReport>& out);
    // Joins `background` (once) and applies its results; its conclusion.
    Outcome join_background(BackgroundStep& background, Scope& scope, std::vector<StepReport>& out);
    // Joins every background step not yet waited for (the job's end); returns how many.
    std::size_t join_all_background(Scope& scope, std::vector<StepReport>& out);

    // Contexts for an expression in `scope` (env: the job env, then scope env, then `step_env`).
    EvalContext context(const Scope& scope, const sandbox::Environment& step_env = {}) const;
    RunStatus status(const Scope& scope) const;

    // One step whose `if` passed: env, continue-on-error, timeout, then run or uses.
    void run_one(const Step& step, Scope& scope, const EvalContext& ctx, StepReport& report);
    void run_script(const Step& step, Scope& scope, const EvalContext& ctx,
                    const sandbox::Environment& step_env,
                    std::optional<std::chrono::milliseconds> timeout, StepReport& report);
    // uses: dispatchers (step_actions.cpp). Outputs go to report.outputs.
    void run_uses(const Step& step, Scope& scope, const EvalContext& ctx,
                  const sandbox::Environment& step_env,
                  std::optional<std::chrono::milliseconds> timeout, StepReport& report);
    void run_composite(const Action& action, const NamedValues& inputs, const Step& step,
                       Scope& scope, const sandbox::Environment& step_env, StepReport& report);
    void run_node(const Action& action, const NamedValues& inputs, const Step& step, Scope& scope,
                  const sandbox::Environment& step_env,
                  std::optional<std::chrono::milliseconds> timeout, StepReport& report);
    void run_checkout(const NamedValues& with, StepReport& report);
    void run_wrap_does_it(const std::string& uses, StepReport& report);
    // The service builtins (step_builtins.cpp): actions/cache's restore (its save queued as a
    // post step), cache/restore, cache/save, upload-artifact, download-artifact.
    void run_cache_restore(BuiltinAction builtin, const std::string& uses, const NamedValues& with,
                           Scope& scope, StepReport& report);
    common::Expected<void> restore_cache(const CacheEntry& entry, StepReport& report);
    // A save: cache/save's inputs, or the state actions/cache's restore left its post step.
    void run_cache_save(const NamedValues& inputs, StepReport& report);
    // This job's cache scopes, its own first (the one it writes).
    std::vector<std::string> cache_scopes() const;
    void run_upload_artifact(const NamedValues& with, StepReport& report);
    void run_download_artifact(const NamedValues& with, StepReport& report);
    // The step's deadline and cancel token, for reads of the workspace.
    sandbox::ReadLimits workspace_read_limits() const;
    // One masked line for the links and special files a save or upload left out.
    void log_skipped(StepReport& report, const std::vector<std::string>& skipped,
                     const std::vector<std::string>& outside);
    // A remote action from the run's lock (jobs/actions/action_resolve.hpp), run as a local one.
    void run_remote(const Step& step, const NamedValues& with, Scope& scope, const EvalContext& ctx,
                    const sandbox::Environment& step_env,
                    std::optional<std::chrono::milliseconds> timeout, StepReport& report);
    void run_action(const Action& action, const NamedValues& with, const Step& step, Scope& scope,
                    const EvalContext& ctx, const sandbox::Environment& step_env,
                    std::optional<std::chrono::milliseconds> timeout, StepReport& report);
    NamedValues action_inputs(const Action& action, const NamedValues& with, const EvalContext& ctx,
                              StepReport& report);
    // GITHUB_* plus the composite's GITHUB_ACTION_PATH, then the scope's and step's env.
    sandbox::Environment process_env(const Scope& scope, const sandbox::Environment& step_env,
                                     const std::string& action_id) const;
    void evaluate_outputs();
    void run_posts();

    // Runs one process step through stepio's run_step and fills `report` from the result.
    StepResult execute(StepSpec spec, const std::string& name, StepReport& report);
    void warn(StepReport& report, const std::string& message);
    void log_start(const StepReport& report);
    void log_finish(const StepReport& report);
    std::optional<std::chrono::milliseconds> remaining() const;
    bool cancelled() const {
        return (m_leg.cancel != nullptr && m_leg.cancel->cancelled()) ||
               (m_step_cancel != nullptr && m_step_cancel->cancelled());
    }
    // Why cancelled() holds: the whole run was cancelled, or the matrix's fail-fast.
    const char* cancel_message() const;
    StepContext step_context(const std::string& name) const;
    void fail_step(StepReport& report, const std::string& message);

    const RunSettings& m_settings;
    const RunServices& m_services;
    const LegInput& m_leg;
    Object m_github;
    Object m_runner;
    Object m_job_context;
    sandbox::Environment m_github_env;
    JobState m_state;
    std::chrono::steady_clock::time_point m_started;  // run() began
    std::chrono::steady_clock::time_point m_deadline;
    bool m_timed_out = false;
    ContinueOnError m_continue = ContinueOnError::no;  // of the step running
    std::vector<PostStep> m_posts;
    Object m_job_steps;  // the job scope's steps context, for outputs
    JobReport m_report;
    std::string m_label;              // job label for logs
    std::filesystem::path m_scratch;  // the wrap's kept scratch (HOME) for this leg
    // temp_root, opened before the first step (RunSettings::temp_root_dir, or here by path).
    std::shared_ptr<const sandbox::SafeDir> m_temp_root;
    // The leg's own executor (RunServices::leg_executors), for as long as the leg runs.
    std::shared_ptr<StepExecutor> m_leg_executor;  // shared with the forks of background steps
    // A fork running a background step: the step's own token (linked to the leg's), which a
    // `cancel:` fires. Null on the job's own JobRun.
    const sandbox::CancelToken* m_step_cancel = nullptr;
    BackgroundSteps m_background;
    // The job's slots for running background steps, shared with its forks (thread-safe).
    std::shared_ptr<BackgroundSlots> m_slots =
        std::make_shared<BackgroundSlots>(k_max_running_background);
};

struct BackgroundStep {
    std::string id;        // the report id
    std::string key;       // fold_case(id): what wait and cancel name
    std::size_t slot = 0;  // its report's index in the job's steps
    std::optional<sandbox::CancelToken> cancel;
    JobState before;               // the job's state when it started (for the delta)
    Scope scope;                   // a copy of the job scope as it started
    StepReport report;             // written by its thread until joined
    std::unique_ptr<JobRun> fork;  // its JobRun; released once applied
    std::thread thread;
    bool applied = false;
    bool cancel_requested = false;          // by a cancel: step
    Outcome conclusion = Outcome::success;  // once applied
};

// The environment of a step as Text values evaluated: `env` (mapping or expression).
ExprExpected<sandbox::Environment> evaluate_env(const YamlNode& env, const EvalContext& context);
// Sets name=value in an Environment (replacing in place).
void set_env(sandbox::Environment& env, const std::string& name, const std::string& value);
// set_env for each of `more`, in linear time however many there are.
void merge_env(sandbox::Environment& env, const sandbox::Environment& more);
Object env_object(const sandbox::Environment& env);
// A continue-on-error style flag (boolean or expression); false when unset. An evaluation
// error is put in `error`.
bool evaluate_flag(const std::optional<YamlNode>& node, const EvalContext& context,
                   std::string& error);
// steps.<id>: {outputs, outcome, conclusion}.
Object step_entry(const NamedValues& outputs, Outcome outcome, Outcome conclusion);

}  // namespace jobs::detail
