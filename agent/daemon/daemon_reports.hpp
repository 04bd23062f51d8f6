#pragma once
// The agent's side of reporting to GitHub: the reports its queue owes (JobQueue::add_report,
// and the `conclude` report that complete()/cancel()/recover_*() queue in the same
// transaction as the state change) become one check run per agent job, named by
// github.check_name, created in_progress by a `start` report and concluded by a `conclude`
// report with the job's final state. A job's run report (STATE_DIR/agent/reports/<id>.json,
// written by its `sandgate gate --report`), when present, adds the steps, annotations and the
// failing step to the conclusion.
//
// Delivery contract (deliver_due):
// - reports are taken from the queue one at a time with JobQueue::claim_reports, leased for
//   k_report_lease (one report's sending, retries included), so per job they go out in the
//   order they were queued (a conclusion never overtakes its start; a start a conclusion
//   follows is never sent) and agents of a pool sharing the queue never send one twice; a
//   round killed mid-send (its agent killed) leaves that report, and its job's later ones,
//   until the lease ends;
// - sent: removed from the queue (when the queue cannot be told, the round keeps telling it for
//   k_mark_patience; after that the report goes out again once its lease ends). GitHub unreachable,
//   5xx, rate limited past the client's budget: kept, retried after a backoff that doubles per
//   attempt (capped), or later when GitHub said when (Retry-After, x-ratelimit-reset:
//   HttpClient::rate_limited_until); while rate limited, the rest of the batch is not tried but put
//   back to that time. The agent's client sleeps through a rate limit of at most
//   k_agent_rate_limit_wait itself; a longer one is the queue's to wait out. 401/403/404: kept and
//   retried slowly (a fixed token or a new installation may come), dropped with an error after
//   k_max_report_attempts. 422 (GitHub refused the body): dropped with an error;
// - a job whose repository is not OWNER/NAME (a local path or URL) has nobody to tell: its
//   reports are removed;
// - with no GitHub token configured, reports are removed with a debug line.
// The journal of `sandgate report`/`gate` (STATE_DIR/github-journal) is replayed too, for each
// configured repository, so runs left by a dead job process are concluded.
// Not thread-safe: one thread delivers.

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/daemon/agent_config.hpp"
#include "agent/daemon/daemon.hpp"  // job_report_path
#include "agent/store/job_store.hpp"
#include "github/check_runs.hpp"
#include "github/http_client.hpp"

namespace agent {

inline constexpr std::int64_t k_max_report_attempts = 20;
inline constexpr std::chrono::seconds k_report_backoff_cap{300};
inline constexpr std::chrono::seconds k_report_lease{90};
inline constexpr std::chrono::seconds k_agent_rate_limit_wait{5};
// How long a round keeps telling the queue about a report it sent while the queue is out of
// reach.
inline constexpr std::chrono::seconds k_mark_patience{30};

struct DeliveryStats {
    std::size_t sent = 0;
    std::size_t kept = 0;     // failed this round (or put back while rate limited), retried later
    std::size_t dropped = 0;  // refused for good, or nobody to report to
};

// The client options the agent uses for GitHub: few attempts per call, since the queue of
// reports (and the next poll) retries anyway.
github::ClientOptions agent_client_options(const AgentConfig& config);

// A client for the configured GitHub (github.token_file), or nullopt when none is configured.
// The file is read again when GitHub refuses its token (agent/daemon/secret_file_token.hpp).
common::Expected<std::optional<github::HttpClient>> agent_github_client(const AgentConfig& config);

class ReportSender {
public:
    // `client` nullopt: nothing is sent (reports are dropped, see above).
    ReportSender(const AgentConfig& config, JobQueue& queue,
                 std::optional<github::HttpClient> client);

    DeliveryStats deliver_due(std::size_t limit = 100);

    // The JobReport a queued report stands for (exposed for tests).
    common::Expected<github::JobReport> job_report(const Job& job, const Report& report) const;

private:
    common::Expected<github::Reporter*> reporter_for(const std::string& repository);
    common::Expected<github::Delivery> send(const Job& job, const Report& report);
    void replay_journal();
    void failed(const Report& report, const common::Error& error, DeliveryStats& stats);
    void deliver(const Report& report, DeliveryStats& stats);
    void mark_sent();
    // How long GitHub asked us to wait from now; zero when it did not.
    std::chrono::milliseconds rate_limit_wait() const;

    const AgentConfig& m_config;
    JobQueue& m_queue;
    std::optional<github::HttpClient> m_client;
    std::map<std::string, github::Reporter> m_reporters;
    std::map<std::string, github::Reporter> m_journal_reporters;
    std::vector<Report> m_unmarked;  // sent, not yet removed from the queue
};

}  // namespace agent
