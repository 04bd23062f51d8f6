#pragma once
// run_step: one already-evaluated step, from its script to its result. Everything between a
// workflow step and sandbox::run: the script file and shell argv, the file-command files,
// the child's environment, live output (split into lines, workflow commands applied, masked,
// forwarded to the log sink), then the file commands applied to the job's state.
//
// The same entry point serves `run:` steps (StepSpec::script), composite action steps (each
// inner step is a StepSpec; the caller gives them the composite's JobState or a copy for
// isolation) and node actions (StepSpec::argv = {"node", ".../main.js"}, env with INPUT_*
// from input_environment() and STATE_* from state_environment()).
//
// Ownership: run_step() borrows everything in StepContext and JobState for the call; it
// creates files only under StepContext::temp_dir and removes them before returning.
// Errors never throw: a step that cannot start (bad shell, unwritable temp dir, sandbox
// refusal) comes back as a failed StepResult with `error` set and nothing run.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jobs/run/file_commands.hpp"
#include "jobs/run/log.hpp"
#include "jobs/run/masker.hpp"
#include "jobs/run/workflow_commands.hpp"
#include "jobs/workflow/workflow_matchers.hpp"
#include "sandbox/process/run.hpp"

namespace jobs {

enum class Outcome { success, failure, cancelled, skipped };
enum class ContinueOnError { no, yes };

std::string_view to_string(Outcome outcome);

struct StepSpec {
    std::string id;  // the steps-context id (may be empty)
    // Exactly one of `script` (a run: step, with `shell`) or `argv` (a program: node
    // actions, builtins) is used: argv wins when non-empty.
    std::string script;
    std::string shell;  // the `shell:` value; empty: the default (see shell.hpp)
    std::vector<std::string> argv;
    std::filesystem::path working_directory;  // empty: the caller's working directory
    sandbox::Environment env;                 // the step's evaluated env (INPUT_*, STATE_*)
    std::optional<std::chrono::milliseconds> timeout;  // timeout-minutes
    ContinueOnError continue_on_error = ContinueOnError::no;
};

// The job-wide state steps read and update: env from the workflow and job (then GITHUB_ENV
// updates), GITHUB_PATH prepends, problem matchers. run_step() applies a step's env/path file
// commands and its add-matcher / remove-matcher commands here.
struct JobState {
    sandbox::Environment env;
    PathPrepends path;
    std::vector<ProblemMatcher> matchers;  // ::add-matcher:: of earlier steps, newest first
};

// How a prepared step process is run: sandbox::run unless the job runs its steps elsewhere
// (the agent's persistent job sandbox, agent/cli/job_executor.hpp). run() honours argv, cwd, env,
// stdin, timeout and output_limit, feeds request.observer with the output, and never runs on
// the host what it was asked to run elsewhere (a refusal is a RunResult with `error` set).
// Thread-safe.
class StepExecutor {
public:
    virtual ~StepExecutor() = default;
    virtual sandbox::RunResult run(const sandbox::RunRequest& request) = 0;
};

// Makes the executor of one job leg's steps (agent/sandboxes/leg_sandboxes.hpp: a persistent
// sandbox per leg). Thread-safe.
class LegExecutors {
public:
    virtual ~LegExecutors() = default;
    // The executor of the steps of leg `label`, whose workspace is `root`; null: the leg's
    // steps run as without it. Called on the leg's thread when the leg starts; the leg drops
    // the executor when it ends (everything it keeps for the leg ends with it). Never throws.
    virtual std::unique_ptr<StepExecutor> open_leg(const std::string& label,
                                                   const std::filesystem::path& root) = 0;
};

// What run_step() borrows from the job runner.
struct StepContext {
    StepLabel label;
    sandbox::Policy policy;  // the posture for the step's process
    // RUNNER_TEMP: the script and the file-command files go here; run_step() adds it to the
    // policy's writable binds so the wrapped step can write its file commands. Its parent is
    // the trusted side's own (no step writes there); temp_dir itself and everything below are
    // the steps', reached only through sandbox/access/safe_access.hpp.
    std::filesystem::path temp_dir;
    // temp_dir's parent, opened by the trusted side before any step ran (not owned; null: it
    // is opened by its path for the step). temp_dir is reached beneath it.
    const sandbox::SafeDir* temp_root = nullptr;
    std::filesystem::path workspace;  // github.workspace: annotation files become relative
    std::filesystem::path
        action_trees;          // the action store's read-only trees (matcher files); may be empty
    Masker* masker = nullptr;  // required; secrets known so far, add-mask adds
    LogSink* log = nullptr;    // required
    // The base the child environment starts from (usually sandbox::current_environment()):
    // the sandbox allowlist (PATH, LANG, ...) is taken from it; shells are found on its PATH
    // unless the job or step sets one.
    sandbox::Environment host;
    std::size_t output_limit = sandbox::k_default_output_limit;
    StepExecutor* executor = nullptr;  // not owned; null: sandbox::run
    // Not owned, may be null: once it fires, the step's process tree is stopped (SIGTERM,
    // then SIGKILL after the grace) and the step concludes `cancelled`.
    const sandbox::CancelToken* cancel = nullptr;
};

struct StepResult {
    Outcome outcome = Outcome::success;     // what happened
    Outcome conclusion = Outcome::success;  // after continue-on-error
    std::optional<int> exit_code;           // sandbox::RunResult::exit_status() when it ran
    bool timed_out = false;
    std::chrono::milliseconds duration{0};
    std::uint64_t stdout_bytes = 0;
    std::uint64_t stderr_bytes = 0;
    bool truncated = false;  // the captured copy dropped bytes (the live log saw them all)
    std::uint64_t skip_markers = 0;
    NamedValues outputs;  // GITHUB_OUTPUT and set-output, raw: mask before showing
    NamedValues state;    // GITHUB_STATE and save-state, raw (for the post step's STATE_*)
    std::vector<Annotation> annotations;  // masked
    std::string summary;                  // GITHUB_STEP_SUMMARY, masked
    std::string error;  // why it failed besides its exit code (masked); empty otherwise
    std::string sandbox_json = "{\"mode\":\"off\"}";
    // Under --network allowlist: every connection the step made through its proxy (raw: the
    // names are the step's; mask before showing).
    std::optional<sandbox::EgressReport> egress;
};

// Runs the step to completion. See the header comment.
StepResult run_step(const StepSpec& spec, const StepContext& context, JobState& job);

// INPUT_<NAME> as the runner derives it: spaces become '_', upper-cased.
std::string input_variable_name(std::string_view input);
sandbox::Environment input_environment(const NamedValues& inputs);
// STATE_<name> for each saved state value.
sandbox::Environment state_environment(const NamedValues& state);

// The child environment run_step() builds: the sandbox allowlist from `host`, then job.env,
// then step env, then `extra`, with PATH = job.path prepends + (step, job or host PATH).
sandbox::Environment step_environment(const sandbox::Environment& host, const JobState& job,
                                      const sandbox::Environment& step_env,
                                      const sandbox::Environment& extra);

}  // namespace jobs
