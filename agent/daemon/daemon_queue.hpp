#pragma once
// The daemon's writes to its queue that must not be lost while the queue's database is out of
// reach (a pool's PostgreSQL restarting, a network blip): a job's end (JobQueue::complete) and
// the start report of a job it just started. A write that fails transiently is kept in memory
// and retried by retry() (each tick of the loop; the queue's own reconnect backoff keeps that
// cheap) until it lands; meanwhile running jobs go on and nothing new is claimed (the claim
// fails the same way). A job's end recorded drops its start report still kept: the conclusion
// alone creates the completed check run, and a start queued after it would reopen the run.
// A write refused for good (the lease was lost: the pool recovered the job while we could not
// reach it) is logged and dropped.
//
// It also tracks whether the queue answers, logging each change once (warn when it stops,
// info when it is back), and counts for the agent's /metrics (AgentStats).
// Not thread-safe: the daemon's loop thread owns it; AgentStats is read by the API's threads.

#include <atomic>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "agent/store/job_store.hpp"

namespace agent {

// This agent's counters and gauges, for /metrics.
struct AgentStats {
    std::atomic<std::int64_t> running{0};         // jobs this agent runs now
    std::atomic<std::int64_t> claimed_total{0};   // jobs it claimed since start
    std::atomic<std::int64_t> finished_total{0};  // jobs whose end it recorded
    std::atomic<std::int64_t> pending_writes{
        0};  // ends/starts kept while the queue is out of reach
    std::atomic<std::int64_t> queue_errors_total{0};
    std::atomic<bool> queue_up{true};                   // the last queue call answered
    std::atomic<std::int64_t> claim_latency_ms_sum{0};  // queued -> claimed, over claimed_total
};

class QueueWrites {
public:
    QueueWrites(JobQueue& queue, std::string owner, AgentStats& stats)
        : m_queue(queue), m_owner(std::move(owner)), m_stats(stats) {}

    void complete(std::int64_t id, JobState state, std::string reason, std::string result_json);
    void start_report(std::int64_t id);
    // Retries what is kept; true when nothing is kept any more.
    bool retry();
    std::size_t pending() const { return m_ends.size() + m_starts.size(); }

    // The outcome of any other queue call (claim, heartbeat, recovery), for the log and stats.
    void answered() { note(nullptr, ""); }
    void failed(std::string_view what, const common::Error& error) { note(&error, what); }

private:
    struct End {
        JobState state;
        std::string reason;
        std::string result_json;
    };
    bool try_complete(std::int64_t id, const End& end);
    bool try_start(std::int64_t id);
    void note(const common::Error* error, std::string_view what);
    void update_gauge() { m_stats.pending_writes = static_cast<std::int64_t>(pending()); }

    JobQueue& m_queue;
    std::string m_owner;
    AgentStats& m_stats;
    std::map<std::int64_t, End> m_ends;
    std::set<std::int64_t> m_starts;  // jobs whose start report is kept
    bool m_down = false;
};

}  // namespace agent
