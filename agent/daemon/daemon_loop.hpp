#pragma once
// Internal to the daemon (agent/daemon/daemon.cpp, agent/daemon/daemon_start.cpp): its loop and the
// wait for one tick, shared by the loop and the start-up.

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "agent/daemon/agent_config.hpp"
#include "agent/daemon/daemon_queue.hpp"
#include "agent/daemon/github_rounds.hpp"
#include "agent/sandboxes/sandbox_manager.hpp"
#include "agent/store/job_store.hpp"

namespace agent {

enum class Notified { no, yes };  // whether the queue wakes the loop (JobQueue::subscribe)

// Why the loop is woken (SIGUSR1, from another thread: the API's, the queue's listener): the
// bits posted, taken by the loop. A job to claim, and a cancel to look for (every running
// job's heartbeat now), are told apart, so a busy pool's notifications do not make every agent
// renew every lease each time a job is queued.
struct Wakeups {
    static constexpr unsigned k_claim = 1;
    static constexpr unsigned k_cancels = 2;
    std::atomic<unsigned> bits{0};
    void post(unsigned what) {
        bits |= what;
        ::kill(::getpid(), SIGUSR1);
    }
};

// Waits one tick for SIGTERM, SIGINT, SIGUSR1 or SIGCHLD (blocked by block_stop_signals);
// the signal taken, or -1.
int wait_signal();

// The loop of agent/daemon/daemon.hpp until the drain ends; the process exit status.
int run_loop(const AgentConfig& config, JobQueue& queue, SandboxManager& sandboxes,
             GitHubRounds& github, const std::filesystem::path& full_binary, AgentStats& stats,
             Wakeups& wakeups, Notified notified);

}  // namespace agent
