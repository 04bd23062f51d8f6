#include "agent/daemon/github_worker.hpp"

#include <spdlog/spdlog.h>

#include "agent/daemon/poll_state.hpp"
#include "agent/daemon/queue_open.hpp"

namespace agent {

common::Expected<GitHubRoundStats> run_github_round(const AgentConfig& config, PollNow poll) {
    // The daemon's queue (SQLite: one connection for the reports and the poll; a pool's
    // PostgreSQL: the poll state shared by the pool), migrated once.
    auto store = SANDGATE_TRY(open_agent_store(config));
    auto& queue = store.queue;
    auto client = SANDGATE_TRY(agent_github_client(config));
    GitHubRoundStats stats;
    const bool polling = poll == PollNow::yes && client && !config.repositories.empty();
    std::optional<github::HttpClient> poll_client;
    if (polling) poll_client = *client;  // the sender takes its own copy
    ReportSender sender(config, *queue, std::move(client));
    stats.reports = sender.deliver_due();
    if (!polling) return stats;
    if (const auto until = poll_client->rate_limited_until()) {
        spdlog::info("poll: skipped, GitHub asked to wait {} s more",
                     std::chrono::duration_cast<std::chrono::seconds>(
                         *until - std::chrono::system_clock::now())
                         .count());
        return stats;
    }
    Poller poller(
        std::move(*poll_client), *queue, *store.poll_state,
        PollerOptions{config.repositories, config.pr_label,
                      std::chrono::duration_cast<std::chrono::milliseconds>(config.poll_interval)});
    stats.poll = poller.poll_once();
    spdlog::debug(
        "poll: {} request(s), {} not modified, {} new job(s), {} cancelled, {} "
        "repositories polled by another agent",
        stats.poll->requests, stats.poll->not_modified, stats.poll->submitted,
        stats.poll->cancelled, stats.poll->skipped);
    if (stats.poll->cancelled > 0) {
        const auto more = sender.deliver_due();
        stats.reports.sent += more.sent;
        stats.reports.kept += more.kept;
        stats.reports.dropped += more.dropped;
    }
    return stats;
}

}  // namespace agent
