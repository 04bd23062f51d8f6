#pragma once
// The container hook's jobs on the host (runner_hook.hpp): one directory per job, under
// STATE_DIR/hook-jobs/ID, made and read by the trusted side only (never bound into a step):
//
//   owner      "PID START" of the process whose end marks the job abandoned (the runner's
//              worker, index.js's parent: `sandgate hook --job-owner`)
//   steps/PID  "PID START" of each `sandgate hook` running one of the job's steps, while it runs
//   scratch/   the steps' HOME and TMPDIR, the sandbox's (bound into every step of the job)
//
// START is the process's start time (/proc/PID/stat), so that a reused pid is never taken for
// the recorded process. cleanup_job finishes its job: every recorded step still running is
// stopped (SIGTERM, which its `sandgate hook` turns into stopping the step's tree; SIGKILL after
// the grace) and the directory removed. Jobs that never reached cleanup_job (a runner killed,
// a machine restarted) are finished the same way by the next prepare_job once their owner is
// gone.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "sandbox/access/safe_access.hpp"

namespace agent {

// A process as it was seen: its pid and its start time (clock ticks since boot).
struct ProcessMark {
    pid_t pid = 0;
    std::uint64_t start = 0;
};

// The live (not zombie) process `pid`, or nullopt when there is none.
std::optional<ProcessMark> process_mark(pid_t pid);

// True while the very process `mark` names runs (same pid, same start time, not a zombie).
bool still_running(const ProcessMark& mark);

// This process running a step of a job: recorded in steps/PID until destroyed.
class StepRecord {
public:
    StepRecord(sandbox::SafeDir steps, std::string name)
        : m_steps(std::move(steps)), m_name(std::move(name)) {}
    StepRecord(StepRecord&& other) noexcept
        : m_steps(std::move(other.m_steps)), m_name(std::exchange(other.m_name, {})) {}
    StepRecord& operator=(StepRecord&&) = delete;
    StepRecord(const StepRecord&) = delete;
    ~StepRecord();

private:
    sandbox::SafeDir m_steps;
    std::string m_name;  // empty once moved from
};

inline constexpr std::chrono::milliseconds k_job_stop_grace{15000};

class HookJobs {
public:
    explicit HookJobs(const std::filesystem::path& state_dir) : m_root(state_dir / "hook-jobs") {}

    // Makes job `id` (a fresh id) owned by `owner`, its scratch made 0700 for `sandbox` (the
    // steps' host identity; unset: ours). Returns the scratch.
    common::Expected<std::filesystem::path> create(const std::string& id, ProcessMark owner,
                                                   std::optional<sandbox::Owner> sandbox) const;
    std::filesystem::path scratch(const std::string& id) const { return m_root / id / "scratch"; }

    // Records this process as running a step of job `id` (which must exist).
    common::Expected<StepRecord> record_step(const std::string& id) const;

    // Stops the job's steps still running, then removes its directory. A missing job is done.
    common::Expected<void> finish(const std::string& id,
                                  std::chrono::milliseconds grace = k_job_stop_grace) const;

    // Finishes every job whose owner is gone (or that has none after a minute: a prepare_job
    // that died half-way). Returns how many; a job that cannot be finished is logged and kept.
    std::size_t reap_stale(std::chrono::milliseconds grace = k_job_stop_grace) const;

private:
    common::Expected<sandbox::SafeDir> open_root() const;
    std::filesystem::path m_root;
};

}  // namespace agent
