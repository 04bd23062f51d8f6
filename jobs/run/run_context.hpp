#pragma once
// What one `sandgate run` knows before any job starts (RunSettings, immutable while jobs
// run), the shared services its jobs use (RunServices), and the builders of the
// expression contexts and GITHUB_* variables that actions/runner gives every step.

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <semaphore>
#include <string>
#include <utility>
#include <vector>

#include "jobs/expr/expr.hpp"
#include "jobs/expr/value.hpp"
#include "jobs/git/checkout.hpp"
#include "jobs/git/repo_info.hpp"
#include "jobs/run/log.hpp"
#include "jobs/run/masker.hpp"
#include "jobs/run/step_runner.hpp"
#include "jobs/workflow/runner_labels.hpp"
#include "jobs/workflow/workflow_model.hpp"
#include "sandbox/process/run.hpp"

namespace jobs {

struct RunSettings {
    std::string event_name = "push";
    Value event = Value(Object{});              // the payload (-e FILE), an Object
    std::filesystem::path repository;           // absolute: the directory the run starts in (-C)
    RepoInfo repo;                              // HEAD and origin of `repository`, when a git repo
    std::string actor;                          // github.actor; default: $USER or "sandgate"
    std::vector<std::string> labels;            // runner labels (globs allowed)
    RunnerPlatform platform = host_platform();  // runner.os/arch; what runs-on may name
    Object secrets;                             // -s / --secret-file
    Object vars;                                // --var
    sandbox::Environment env;  // --env / --env-file: the workflow's env, lowest priority
    Object inputs;             // --input, for workflow_dispatch / workflow_call
    std::vector<std::pair<std::string, std::string>> matrix_filter;  // --matrix KEY:VALUE
    std::vector<std::string> job_filter;                             // -j JOB
    sandbox::Policy policy;
    sandbox::Environment host;        // the base of every child environment (allowlisted)
    std::filesystem::path temp_root;  // per-run scratch: RUNNER_TEMP, file commands, scripts
    // temp_root opened by the caller that made it, before any step ran (may be null: each job
    // then opens temp_root by its path when it starts). Every step reaches RUNNER_TEMP beneath
    // this descriptor, whatever a step does to the path meanwhile (sandbox/access/safe_access.hpp).
    std::shared_ptr<const sandbox::SafeDir> temp_root_dir;
    std::string run_id = "1";
    std::string run_number = "1";
    std::string node = "node";  // the JavaScript actions' runtime (a path, or a name on PATH)
};

class ActionResolver;  // jobs/actions/action_resolve.hpp
class CacheStore;      // jobs/builtins/cache_store.hpp
class ArtifactStore;   // jobs/builtins/artifact_store.hpp

struct JobReport;  // jobs/run/run_report.hpp

// Told when a job leg starts running (its `if` and runs-on admitted it), on the leg's
// thread: `job` holds its id, masked display name and matrix; `workflow` is the workflow the
// job is declared in (a called workflow's, for the jobs of a `uses:` job). Must be
// thread-safe; must not throw.
class JobObserver {
public:
    virtual ~JobObserver() = default;
    virtual void job_started(const Workflow& workflow, const JobReport& job) = 0;
};

// Shared by all jobs of a run; every member is thread-safe.
struct RunServices {
    LogSink& log;
    Masker& masker;
    WorkspaceProvider& workspace;
    std::counting_semaphore<>& legs;   // bounds job legs running at once
    JobObserver* observer = nullptr;   // optional; not owned
    StepExecutor* executor = nullptr;  // not owned; null: every step through sandbox::run
    // The whole run's stop (sandgate run's SIGINT/SIGTERM); not owned; may be null. Once it
    // fires, running steps are stopped as on a timeout, their legs and the jobs not started
    // yet conclude cancelled, and only steps and jobs whose `if` calls always() or
    // cancelled() still run (without the token), as actions/runner does on a cancelled run.
    const sandbox::CancelToken* cancel = nullptr;
    // Remote actions (resolved before the jobs start); not owned; null: a remote `uses:` fails.
    ActionResolver* actions = nullptr;
    // The actions/cache builtin's store (not owned; null: a cache step restores and saves
    // nothing, with a line saying so) and the run's artifacts (null: upload and download fail).
    CacheStore* caches = nullptr;
    ArtifactStore* artifacts = nullptr;
    // One executor per job leg (not owned; null: none). A leg whose executor it makes runs its
    // steps there instead of through `executor`.
    LegExecutors* leg_executors = nullptr;
};

// github.* for one job of `workflow`.
Object github_context(const RunSettings& settings, const Workflow& workflow,
                      std::string_view job_id, const std::filesystem::path& workspace);
// runner.* (os, arch, name, temp, tool_cache, workspace, debug) for a job whose
// GITHUB_WORKSPACE is `workspace`: runner.workspace is its parent, as on GitHub
// (GITHUB_WORKSPACE = RUNNER_WORKSPACE/<repository name>).
Object runner_context(const RunSettings& settings, const std::filesystem::path& workspace);
// The directory runner.workspace names for `workspace`: its parent (trailing `/` ignored).
std::filesystem::path runner_workspace(const std::filesystem::path& workspace);
// The variables actions/runner sets for every step: CI, GITHUB_*, RUNNER_* (RUNNER_WORKSPACE
// from runner.workspace).
sandbox::Environment github_environment(const Object& github, const Object& runner);

// Inputs of workflow_dispatch / workflow_call: given values (strings or typed) take
// precedence, then defaults (evaluated against `context`, for `${{ 1 }}`); converted by
// type (boolean, number, string). `strict`: an input given but not declared, or a required
// one missing, is an error (calls of reusable workflows); `lenient` (dispatch, and the CLI's
// --input) keeps undeclared ones.
enum class InputCheck { lenient, strict };
common::Expected<Object> resolve_inputs(const std::vector<InputSpec>& specs, const Object& given,
                                        const EvalContext& context, InputCheck check);

// Value to env-var text: strings as is, others as GitHub prints them.
std::string env_text(const Value& value);

}  // namespace jobs
