#include "agent/github_worker.hpp"

#include <spdlog/spdlog.h>

#include "agent/poll_state.hpp"

namespace agent {

sandbox::Expected<GitHubRoundStats> run_github_round(const AgentConfig& config, PollNow poll) {
    // One connection, opened and migrated once, for the reports and the poll.
    auto store = open_sqlite_store(default_queue_path(config.state_dir));
    if (!store) return std::unexpected(store.error());
    auto& queue = store->queue;
    auto client = agent_github_client(config);
    if (!client) return std::unexpected(client.error());
    GitHubRoundStats stats;
    const bool polling = poll == PollNow::yes && *client && !config.repositories.empty();
    std::optional<github::HttpClient> poll_client;
    if (polling) poll_client = **client;  // the sender takes its own copy
    ReportSender sender(config, *queue, std::move(*client));
    stats.reports = sender.deliver_due();
    if (!polling) return stats;
    Poller poller(std::move(*poll_client), *queue, *store->poll_state,
                  PollerOptions{config.repositories, config.pr_label});
    stats.poll = poller.poll_once();
    spdlog::debug("poll: {} request(s), {} not modified, {} new job(s), {} cancelled",
                  stats.poll->requests, stats.poll->not_modified, stats.poll->submitted,
                  stats.poll->cancelled);
    if (stats.poll->cancelled > 0) {
        const auto more = sender.deliver_due();
        stats.reports.sent += more.sent;
        stats.reports.kept += more.kept;
        stats.reports.dropped += more.dropped;
    }
    return stats;
}

}  // namespace agent
