#pragma once
// The official runner's container hooks (ACTIONS_RUNNER_CONTAINER_HOOKS), answered by
// sandgate's wrap instead of a container engine: a runner registered the usual way, with
// ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER=true, runs every step of its jobs inside bubblewrap.
//
//   prepare_job         records the job's mounts and environment, creates its directory and
//                       private scratch (TMPDIR of every step, kept for the whole job;
//                       runner_hook_jobs.hpp) and writes the response file as the runner
//                       deserializes it (context.services a list, isAlpine); services are
//                       refused (no container engine). Jobs of an owner that is gone are
//                       finished first (stale scratch reaped).
//   run_script_step     runs entryPoint + entryPointArgs in the wrap with the job's mounts at
//                       their container paths (/__w, /__e, /github/home, ...), starting in
//                       workingDirectory (a container path; coreutils' env -C inside),
//                       HOME=/github/home when mounted (or the job's HOME);
//                       the entry point and prependPath are looked up inside, where those
//                       paths are. The arguments arrive split on spaces, a node action's
//                       script path in literal quotes: they are rejoined and parsed as the
//                       runner's own process launcher would (rejoined_arguments). The hook's
//                       exit status is the step's.
//   run_container_step  needs an image: only with --sandbox container (a runtime on PATH); a
//                       null entryPoint runs the image's entrypoint with the arguments; it
//                       starts in the host path of workingDirectory (bound at itself).
//   cleanup_job         stops the job's steps still running, removes its directory; idempotent.
//
// The input (JSON on stdin) and the response file follow actions/runner-container-hooks.
// The runner's own mounts of the docker socket or of named volumes are dropped with a warning:
// binding the engine's socket would hand the job the host. userMountVolumes (the workflow's
// container.volumes, which a pull request controls) are refused unless a host path within
// HookOptions::allowed_volumes, and then bound read-only.

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "sandbox/process/run.hpp"

namespace agent {

enum class HookCommand { prepare_job, cleanup_job, run_script_step, run_container_step };

struct HookMount {
    std::string source;
    std::string target;
    sandbox::Access access = sandbox::Access::read_only;
};

struct HookStep {       // run_script_step and run_container_step arguments
    std::string image;  // run_container_step only
    std::string entry_point;
    std::vector<std::string> entry_point_args;
    std::map<std::string, std::string> env;
    std::vector<std::string> prepend_path;
    std::string working_directory;
    std::vector<HookMount> mounts;       // run_container_step only (prepare_job's otherwise)
    std::vector<HookMount> user_mounts;  // run_container_step: the workflow's, unchecked
};

struct HookJob {  // what prepare_job records in the state the runner hands back later
    std::string id;
    std::string image;
    std::vector<HookMount> mounts;  // the runner's, and the allowed user volumes (read-only)
    std::map<std::string, std::string> env;
};

struct HookInput {
    HookCommand command = HookCommand::prepare_job;
    std::string response_file;     // empty when null
    std::optional<HookJob> state;  // from a previous prepare_job; absent for prepare_job
    HookJob prepare;               // prepare_job: the job container (id unset)
    std::vector<HookMount> prepare_user_mounts;  // prepare_job: the workflow's, unchecked
    std::vector<std::string> services;           // prepare_job: service context names
    HookStep step;
};

// Parses the hook's JSON input. Errors name the field ("args.entryPoint: ...").
common::Expected<HookInput> parse_hook_input(std::string_view json);

struct HookOptions {
    sandbox::Policy policy;           // mode and network of every step (binds are added)
    std::filesystem::path state_dir;  // jobs live under state_dir/hook-jobs/ (runner_hook_jobs)
    pid_t job_owner = 0;              // prepare_job: whose end marks the job abandoned
    // userMountVolumes allowed: host paths within one of these, bound read-only.
    std::vector<std::filesystem::path> allowed_volumes;
    std::optional<std::chrono::milliseconds> step_timeout;
    // Not owned; may be null. Fired (SIGINT, SIGTERM, the parent's death): the running step's
    // tree is stopped and the hook returns 130.
    const sandbox::CancelToken* cancel = nullptr;
};

// Carries out one hook command. Returns the process exit status (the step's for run_*),
// or an error (exit 1 for the runner) whose message names what was wrong.
common::Expected<int> run_hook(const HookInput& input, const HookOptions& options);

}  // namespace agent
