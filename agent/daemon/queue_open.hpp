#pragma once
// The queue an agent's configuration names (queue.url): the embedded SQLite file under the
// state directory, or a pool's PostgreSQL database, its password read from
// queue.password_file (when set; else libpq finds it in PGPASSFILE or ~/.pgpass). Used by the
// daemon (agent/daemon/daemon.cpp) and its GitHub rounds (agent/daemon/github_worker.cpp), so both
// always open the same queue.

#include <memory>
#include <string>

#include "agent/daemon/agent_config.hpp"
#include "agent/daemon/poll_state.hpp"
#include "agent/store/job_store.hpp"

namespace agent {

// The PostgreSQL options of a configuration with queue.url set; invalid_input when the
// password file cannot be read (see read_secret_file).
common::Expected<PostgresOptions> postgres_options(const AgentConfig& config);

common::Expected<std::unique_ptr<JobQueue>> open_agent_queue(const AgentConfig& config);
common::Expected<QueueStore> open_agent_store(const AgentConfig& config);

// How the daemon names a pool's queue to its job processes (agent/daemon/daemon.cpp), which record
// their steps' evidence there (agent/cli/job_executor.cpp). Never a password: the variable names
// the password file.
inline constexpr const char* k_queue_url_variable = "SANDGATE_QUEUE_URL";
inline constexpr const char* k_queue_password_file_variable = "SANDGATE_QUEUE_PASSWORD_FILE";

// The queue of a job process: the pool's when SANDGATE_QUEUE_URL is set, else the SQLite
// file under `state_dir`.
common::Expected<std::unique_ptr<JobQueue>> open_job_process_queue(
    const std::filesystem::path& state_dir);

}  // namespace agent
