#pragma once
// The agent daemon's loop (`sandgate agent`): recover what a previous life left (jobs leased
// to this agent id are concluded or re-queued as configured, stale sandboxes reaped), serve
// the API, claim queued jobs (at most max_jobs at once) and run each as a child process,
// renew leases, honour cancellations, time jobs out, and drain on SIGTERM/SIGINT: no new
// jobs, running ones get `drain` to finish and are then cancelled. It never talks to GitHub:
// polling and reporting run in `sandgate-full agent-github` rounds it starts when due
// (agent/daemon/github_rounds.hpp), so it runs in `sandgate-agent`, a binary without libcurl,
// libgit2 or OpenSSL.
//
// A job's process is `sandgate-full gate --repo R --sha S [--ref REF] --event E [-j JOB]
// --state-dir DIR --sandbox MODE --network MODE --report FILE` (job.command replaces it;
// either way the job is also described by SANDGATE_JOB_* variables, among them
// SANDGATE_JOB_CLONE_URL, where its repository is fetched from, and SANDGATE_JOB_REPORT, where
// a run report, when written, adds its steps to the job's check run). Exit 0 -> succeeded, 1 ->
// failed, 124 -> timed_out; a cancel -> cancelled; anything else -> failed with the status in the
// reason. Its output goes to STATE_DIR/agent/logs/<id>.log (served by GET /v1/jobs/<id>/log).

#include <atomic>
#include <memory>

#include "agent/daemon/agent_config.hpp"
#include "agent/store/job_store.hpp"

namespace agent {

// Runs until SIGTERM or SIGINT (blocked by the caller before any thread starts, see
// block_stop_signals()). Returns the process exit status: 0 after a clean drain, 1 when
// start-up failed (the message is logged).
int run_daemon(const AgentConfig& config);

// Blocks SIGTERM, SIGINT, SIGUSR1 and SIGCHLD in the calling thread (inherited by threads
// created later), so the loop can take them with sigtimedwait (SIGCHLD: a GitHub round or a
// job ended). Children get an empty mask (agent/daemon/job_process.cpp).
void block_stop_signals();

// The job's argv and environment (exposed for tests).
std::vector<std::string> job_argv(const AgentConfig& config, const Job& job,
                                  const std::filesystem::path& self);
sandbox::Environment job_environment(const AgentConfig& config, const Job& job);

// The agent's paths under the state directory.
std::filesystem::path agent_dir(const AgentConfig& config);
std::filesystem::path api_socket_path(const AgentConfig& config);
// A job's run report (its `sandgate gate --report`), read by the GitHub rounds.
std::filesystem::path job_report_path(const AgentConfig& config, std::int64_t job_id);
// A job's workspace: its persistent sandbox's root, removed when the job ends.
std::filesystem::path job_workspace(const AgentConfig& config, std::int64_t job_id);

}  // namespace agent
