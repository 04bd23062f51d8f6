#pragma once
// The daemon's side of its GitHub traffic (the actions/runner Listener/Worker split): the
// daemon never talks to GitHub itself. When a round is due it starts one worker process,
// `sandgate-full agent-github --config FILE [--poll] [-v]` (agent/daemon/github_worker.hpp), at
// most one at a time, in its own process group, its output on the daemon's stderr. A round is due
// when
//   - polling is configured and poll_interval has passed since the last poll round started;
//   - the queue owes a report whose retry time has come (looked at each second, or at once
//     after wake()) and that is this agent's (or nobody's); one of another agent of a pool
//     (which sends its own) counts at most every k_foreign_reports, so those of an agent
//     that died still go out;
//   - the report journal (STATE_DIR/github-journal) is not empty, at most every
//     k_journal_retry.
// A worker still running after k_github_round_deadline is killed (its group, SIGKILL); the
// queue's transactions make that safe.
//
// A round that fails (exits non-zero, dies of a signal, cannot be started: an unreadable
// token, a broken configuration, sandgate-full missing, GitHub answers unusable) backs off:
// after N failed rounds in a row no round of any kind starts for
// min(k_round_backoff_first * 2^(N-1), k_round_backoff_cap), whatever is due meanwhile
// (wake() from a webhook's job or a queued report, the poll timer, the journal) waits for it.
// A round that exits 0 ends the backoff. Each change of delay is logged once (warn), with the
// failure's exit status. Its exit is seen by tick(), which tells the loop to
// look at the queue again (a poll may have queued or cancelled jobs); the loop's
// sigtimedwait also takes SIGCHLD, so it wakes at once.
//
// With no github.token_file there is nobody to report to: owed reports are removed here, no
// worker is ever started. Not thread-safe: the daemon's loop thread owns it.

#include <chrono>
#include <filesystem>
#include <optional>

#include "agent/daemon/agent_config.hpp"
#include "agent/daemon/job_process.hpp"
#include "agent/store/job_store.hpp"

namespace agent {

inline constexpr std::chrono::minutes k_github_round_deadline{5};
inline constexpr std::chrono::seconds k_journal_retry{30};
inline constexpr std::chrono::seconds k_round_backoff_first{1};
inline constexpr std::chrono::seconds k_round_backoff_cap{std::chrono::minutes(5)};
inline constexpr std::chrono::seconds k_foreign_reports{10};

enum class Draining { no, yes };
enum class PollNow { no, yes };  // whether a round polls (it always sends what is owed)

class GitHubRounds {
public:
    // `worker_binary`: sandgate-full (the daemon's own directory holds it); `deadline`: how
    // long a round may run before it is killed.
    GitHubRounds(const AgentConfig& config, JobQueue& queue, std::filesystem::path worker_binary,
                 std::chrono::milliseconds deadline = k_github_round_deadline);
    GitHubRounds(const GitHubRounds&) = delete;
    GitHubRounds& operator=(const GitHubRounds&) = delete;

    // A report was queued: look for due reports at the next tick (or when a backoff ends).
    void wake() { m_woken = true; }

    // Reaps a finished worker, kills one past its deadline, starts one when a round is due
    // (no poll rounds while draining). True when a worker ended during this call.
    bool tick(Draining draining);

    // At shutdown: lets a running worker finish for at most `grace`, then kills it.
    void finish(std::chrono::seconds grace);

    bool running() const { return m_worker.has_value(); }
    // The delay the last failed rounds imposed; zero when the last round succeeded.
    std::chrono::seconds backoff() const { return m_backoff; }

private:
    using Clock = std::chrono::steady_clock;

    bool reap();
    bool report_check_due();
    bool reports_due();
    bool journal_due();
    void drop_reports();
    void start(PollNow poll);
    void round_failed(const std::string& why);
    void round_succeeded();

    const AgentConfig& m_config;
    JobQueue& m_queue;
    std::filesystem::path m_binary;
    std::chrono::milliseconds m_round_deadline;
    std::optional<JobProcess> m_worker;
    Clock::time_point m_deadline;
    Clock::time_point m_next_poll;
    Clock::time_point m_next_report_check;
    Clock::time_point m_next_journal;
    Clock::time_point m_not_before;            // no round starts before (the backoff)
    Clock::time_point m_next_foreign_check{};  // other agents' due reports looked at from then
    std::chrono::seconds m_backoff{0};
    int m_failures = 0;  // failed rounds in a row
    bool m_woken = true;
};

}  // namespace agent
