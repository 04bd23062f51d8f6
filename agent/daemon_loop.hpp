#pragma once
// Internal to the daemon (agent/daemon.cpp, agent/daemon_start.cpp): its loop and the wait
// for one tick, shared by the loop and the start-up.

#include <filesystem>

#include "agent/agent_config.hpp"
#include "agent/daemon_queue.hpp"
#include "agent/github_rounds.hpp"
#include "agent/job_store.hpp"
#include "agent/sandbox_manager.hpp"

namespace agent {

enum class Notified { no, yes };  // whether the queue wakes the loop (JobQueue::subscribe)

// Waits one tick for SIGTERM, SIGINT, SIGUSR1 or SIGCHLD (blocked by block_stop_signals);
// the signal taken, or -1.
int wait_signal();

// The loop of agent/daemon.hpp until the drain ends; the process exit status.
int run_loop(const AgentConfig& config, JobQueue& queue, SandboxManager& sandboxes, GitHubRounds& github,
             const std::filesystem::path& full_binary, AgentStats& stats, Notified notified);

}  // namespace agent
