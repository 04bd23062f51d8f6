#pragma once
// Steps through a job's persistent sandbox: a jobs::StepExecutor that sends each step to the
// job's broker (sandbox/broker/broker.hpp) as one exec request instead of starting a wrap per step,
// so the steps of a job share one set of namespaces and pay bwrap's start-up once.
//
// The daemon creates the job's sandbox (agent/sandboxes/sandbox_manager.hpp; its root is the job's
// workspace, SANDGATE_JOB_WORKSPACE, and TMPDIR lies inside it) before it starts the job
// process, and hands the process SANDGATE_BROKER_SOCKET, SANDGATE_BROKER_IDENTITY and
// SANDGATE_JOB_WORKSPACE; a `sandgate run` or `sandgate gate` started with those variables
// runs its steps here (the gate checks its worktrees out inside the workspace).
//
// Contract: the request's argv, cwd (inside the sandbox root), env, stdin, timeout and output
// limit are sent; its policy is not (the sandbox's posture was fixed when it was created and
// recorded on the job). The output is given to the observer as the step writes it (a
// streamed exec: the broker's output frames). When the request's CancelToken fires mid-step, the
// connection is hung up on, which makes the broker stop the step (SIGTERM, SIGKILL after the
// request's kill grace); the step then ends `cancelled` with the output it had made. Steps of
// parallel legs take turns (the broker runs one command at a time and would refuse the second as
// busy): a step waits for the one before it to end. A refused or unreachable broker is a RunResult
// whose error is sandbox_unavailable with the refusal named: nothing ever runs on the host instead.
// When a job queue is given, each exec leaves value-free evidence (identity, the sandbox's posture,
// exit, duration, byte counts, truncation, skip markers; never argv, env values or stdin) on the
// job's record, as a "step" event.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent/store/job_store.hpp"
#include "jobs/run/step_runner.hpp"

namespace agent {

inline constexpr const char* k_broker_socket_variable = "SANDGATE_BROKER_SOCKET";
inline constexpr const char* k_broker_identity_variable = "SANDGATE_BROKER_IDENTITY";
inline constexpr const char* k_job_workspace_variable = "SANDGATE_JOB_WORKSPACE";

// The job sandbox the agent handed this process through the environment.
struct JobSandboxEnvironment {
    std::filesystem::path socket;     // the broker's socket
    std::string identity;             // the sandbox's canonical identity
    std::filesystem::path workspace;  // the sandbox's writable root (may be empty for `run`)
};

// nullopt when neither SANDGATE_BROKER_SOCKET nor SANDGATE_BROKER_IDENTITY is set (a run by
// hand); invalid_input naming the missing variable when only one of them is, or when
// `need_workspace` and SANDGATE_JOB_WORKSPACE is missing or not an absolute directory: a
// half-set environment never means "run the steps on the host".
enum class NeedWorkspace { no, yes };
common::Expected<std::optional<JobSandboxEnvironment>> job_sandbox_from_environment(
    NeedWorkspace need_workspace);

class BrokerStepExecutor final : public jobs::StepExecutor {
public:
    // `evidence`: not owned, may be null; `job_id` names the record it is appended to.
    // `posture`: the sandbox's wrap as recorded on the job (JSON object text, e.g.
    // {"mode":"bwrap","network":"none"}); copied into each step's evidence.
    BrokerStepExecutor(std::filesystem::path socket, std::string identity,
                       JobQueue* evidence = nullptr, std::int64_t job_id = 0,
                       std::string posture = "{}");
    sandbox::RunResult run(const sandbox::RunRequest& request) override;

private:
    std::filesystem::path m_socket;
    std::string m_identity;
    JobQueue* m_evidence;
    std::int64_t m_job_id;
    std::string m_posture;
    std::mutex m_turn;  // one exec at a time: the broker refuses a concurrent one as busy
};

// The executor for `box`, recording into the job queue named by SANDGATE_JOB_ID and
// SANDGATE_STATE_DIR (or a pool's SANDGATE_QUEUE_URL, agent/daemon/queue_open.hpp) when set (opened
// here and owned by the returned object; the posture is read from the job's recorded policy). With
// `asked` (the posture the caller's flags ask for): invalid_input when the recorded sandbox is
// weaker (unwrapped where a wrap was asked, the host's network where none was), so a step never
// runs with less isolation than asked; invalid_input too when `asked` has egress rules (the job
// sandbox has no proxy for them: never a silent loss of what was allowed).
common::Expected<std::unique_ptr<jobs::StepExecutor>> broker_executor(
    const JobSandboxEnvironment& box, const sandbox::Policy* asked = nullptr);

// The executor the daemon asked for through the environment: the job sandbox's; else, for a job
// of the agent without one (SANDGATE_JOB_ID and SANDGATE_STATE_DIR set: job.network allowlist,
// job.persistent_sandbox false), recording_executor's; else null (a run by hand). A half-set
// job sandbox environment yields an executor that refuses every step.
std::unique_ptr<jobs::StepExecutor> broker_executor_from_environment(const jobs::Masker& masker);

// For a job of the agent that has no job sandbox: each step runs through sandbox::run (a wrap
// of its own, as with no executor) and leaves the same value-free evidence as a "step" event
// on the job's record (SANDGATE_JOB_ID in SANDGATE_STATE_DIR's or the pool's queue), its
// posture included and, under --network allowlist, its "egress" connections (host and reason
// masked with `masker`, which must outlive the executor). Null when the variables are unset or
// the queue cannot be opened (logged: the steps still run, with their report).
std::unique_ptr<jobs::StepExecutor> recording_executor(const jobs::Masker& masker);

}  // namespace agent
