#pragma once
// One round of the agent's GitHub traffic, run in a short-lived process that the daemon starts
// (`sandgate-full agent-github --config FILE [--poll]`, see agent/daemon/github_rounds.hpp), so
// that the daemon itself never loads libcurl, libgit2 or OpenSSL and a slow GitHub never stalls its
// loop. A round:
//   1. sends the reports the queue owes (agent/daemon/daemon_reports.hpp's delivery contract) and
//      replays the report journal of `sandgate report`/`gate`;
//   2. with PollNow::yes, polls the configured repositories once (agent/daemon/poller.hpp), its
//      ETags and merge-queue heads kept with the queue (agent/daemon/poll_state.hpp); in a pool,
//      only the repositories whose turn it is (one agent per repository and interval); not at all
//      while GitHub's rate limit says to wait;
//   3. sends the reports owed again when the poll cancelled jobs (their conclusions).
// The queue is the one the daemon holds (agent/daemon/queue_open.hpp: its SQLite file, WAL and busy
// timeout, as both processes write it, or the pool's PostgreSQL); every mutation is one
// transaction, so a round killed at its deadline loses nothing but its own progress.

#include <optional>

#include "agent/daemon/agent_config.hpp"
#include "agent/daemon/daemon_reports.hpp"
#include "agent/daemon/github_rounds.hpp"  // PollNow
#include "agent/daemon/poller.hpp"

namespace agent {

struct GitHubRoundStats {
    DeliveryStats reports;
    std::optional<PollStats> poll;  // when a poll ran
};

// Fails (nothing sent) when the queue cannot be opened or the GitHub token cannot be read;
// per-repository and per-report failures are logged and counted, not errors.
common::Expected<GitHubRoundStats> run_github_round(const AgentConfig& config, PollNow poll);

}  // namespace agent
