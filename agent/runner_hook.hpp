#pragma once
// The official runner's container hooks (ACTIONS_RUNNER_CONTAINER_HOOKS), answered by
// sandgate's wrap instead of a container engine: a runner registered the usual way, with
// ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER=true, runs every step of its jobs inside bubblewrap.
//
//   prepare_job         records the job's mounts and environment, creates its private scratch
//                       (HOME and TMPDIR of every step, kept for the whole job) and writes the
//                       response file; services are refused (no container engine).
//   run_script_step     runs entryPoint + entryPointArgs in the wrap with the job's mounts at
//                       their container paths (/__w, /__e, /github/home, ...); the hook's exit
//                       status is the step's.
//   run_container_step  needs an image: only with --sandbox container (a runtime on PATH).
//   cleanup_job         removes the job's scratch; idempotent.
//
// The input (JSON on stdin) and the response file follow actions/runner-container-hooks.
// Mounts of the docker socket or of named volumes are dropped with a warning: binding the
// engine's socket would hand the job the host.

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/error.hpp"
#include "sandbox/run.hpp"

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
    std::vector<HookMount> mounts;  // run_container_step only (prepare_job's otherwise)
};

struct HookJob {  // what prepare_job records in the state the runner hands back later
    std::string id;
    std::string image;
    std::filesystem::path scratch;
    std::vector<HookMount> mounts;
    std::map<std::string, std::string> env;
};

struct HookInput {
    HookCommand command = HookCommand::prepare_job;
    std::string response_file;          // empty when null
    std::optional<HookJob> state;       // from a previous prepare_job; absent for prepare_job
    HookJob prepare;                    // prepare_job: the job container (id and scratch unset)
    std::vector<std::string> services;  // prepare_job: service context names
    HookStep step;
};

// Parses the hook's JSON input. Errors name the field ("args.entryPoint: ...").
sandbox::Expected<HookInput> parse_hook_input(std::string_view json);

struct HookOptions {
    sandbox::Policy policy;           // mode and network of every step (binds are added)
    std::filesystem::path state_dir;  // job scratches live under state_dir/hook-jobs/
    std::optional<std::chrono::milliseconds> step_timeout;
};

// Carries out one hook command. Returns the process exit status (the step's for run_*),
// or an error (exit 1 for the runner) whose message names what was wrong.
sandbox::Expected<int> run_hook(const HookInput& input, const HookOptions& options);

}  // namespace agent
