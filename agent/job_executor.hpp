#pragma once
// Steps through a job's persistent sandbox: a jobs::StepExecutor that sends each step to the
// job's broker (sandbox/broker.hpp) as one exec request instead of starting a wrap per step,
// so the steps of a job share one set of namespaces and pay bwrap's start-up once.
//
// The daemon creates the job's sandbox (agent/sandbox_manager.hpp; its root is the job's
// workspace, SANDGATE_JOB_WORKSPACE, and TMPDIR lies inside it) before it starts the job
// process, and hands the process SANDGATE_BROKER_SOCKET and SANDGATE_BROKER_IDENTITY; a
// `sandgate run` (or gate) started with those variables runs its steps here.
//
// Contract: the request's argv, cwd (inside the sandbox root), env, stdin, timeout and output
// limit are sent; its policy is not (the sandbox's posture was fixed when it was created and
// recorded on the job). The output is given to the observer when the step ends (the broker
// answers once). A refused or unreachable broker is a RunResult whose error is
// sandbox_unavailable with the refusal named: nothing ever runs on the host instead. When a
// job queue is given, each exec leaves value-free evidence (identity, exit, duration, byte
// counts, truncation, skip markers; never argv, env values or stdin) on the job's record.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "agent/job_store.hpp"
#include "jobs/step_runner.hpp"

namespace agent {

inline constexpr const char* k_broker_socket_variable = "SANDGATE_BROKER_SOCKET";
inline constexpr const char* k_broker_identity_variable = "SANDGATE_BROKER_IDENTITY";

class BrokerStepExecutor final : public jobs::StepExecutor {
public:
    // `evidence`: not owned, may be null; `job_id` names the record it is appended to.
    BrokerStepExecutor(std::filesystem::path socket, std::string identity,
                       JobQueue* evidence = nullptr, std::int64_t job_id = 0);
    sandbox::RunResult run(const sandbox::RunRequest& request) override;

private:
    std::filesystem::path m_socket;
    std::string m_identity;
    JobQueue* m_evidence;
    std::int64_t m_job_id;
};

// The executor the daemon asked for through the environment (the two variables above, plus
// SANDGATE_JOB_ID and SANDGATE_STATE_DIR for the evidence), or null when they are not set.
// The queue it records into is opened here and owned by the returned object.
std::unique_ptr<jobs::StepExecutor> broker_executor_from_environment();

}  // namespace agent
