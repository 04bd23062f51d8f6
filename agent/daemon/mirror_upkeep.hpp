#pragma once
// The agent's side of the mirror cache: which URL a job's repository is fetched from, and the
// collection of mirrors (jobs/git/mirror_gc.hpp) the daemon runs at start and daily on its loop's
// thread (so no job starts, creating its scope, meanwhile): the repositories of
// github.repositories are served (none listed: any is), the repositories of running jobs are
// in use, and agent.mirror_idle_days bounds the idle time.

#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/daemon/agent_config.hpp"
#include "jobs/git/mirror_gc.hpp"

namespace agent {

// The URL (or path) a job of `repository` fetches: an "owner/name" through github.clone_url
// or the web host of github.api_url; anything else as given.
std::string repository_url(const AgentConfig& config, const std::string& repository);

// The scope names of the configured repositories; nullopt when none is listed (any is served).
// A repository whose URL cannot be parsed is skipped (it can have no mirror).
std::optional<std::set<std::string>> served_mirror_scopes(const AgentConfig& config);

// Collects the mirrors of config.state_dir, logging what it removed, kept busy or failed to
// remove (spdlog); the report is returned for tests. Never throws; errors are logged.
jobs::MirrorGcReport collect_agent_mirrors(const AgentConfig& config,
                                           const std::vector<std::string>& running_repositories,
                                           jobs::TrashRemoval removal = jobs::TrashRemoval::now);

// The daemon's collections: the decisions and renames (quick, under the fetch locks) on the
// caller's thread, the removal of the trash on a thread of its own, so that deleting a large
// mirror never stalls the loop's lease renewals. One removal at a time: a collection first
// waits for the previous one's.
class MirrorUpkeep {
public:
    explicit MirrorUpkeep(const AgentConfig& config) : m_config(config) {}
    ~MirrorUpkeep();  // waits for the trash removal in flight
    MirrorUpkeep(const MirrorUpkeep&) = delete;
    MirrorUpkeep& operator=(const MirrorUpkeep&) = delete;

    jobs::MirrorGcReport collect(const std::vector<std::string>& running_repositories);

private:
    const AgentConfig& m_config;
    std::thread m_remover;
};

}  // namespace agent
