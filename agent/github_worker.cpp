#include "agent/github_worker.hpp"

#include <spdlog/spdlog.h>

#include "agent/poll_state.hpp"

namespace agent {

sandbox::Expected<GitHubRoundStats> run_github_round(const AgentConfig& config, PollNow poll) {
    const auto path = default_queue_path(config.state_dir);
    auto queue = open_sqlite_queue(path);
    if (!queue) return std::unexpected(queue.error());
    auto client = agent_github_client(config);
    if (!client) return std::unexpected(client.error());
    GitHubRoundStats stats;
    const bool polling = poll == PollNow::yes && *client && !config.repositories.empty();
    std::optional<github::HttpClient> poll_client;
    if (polling) poll_client = **client;  // the sender takes its own copy
    ReportSender sender(config, **queue, std::move(*client));
    stats.reports = sender.deliver_due();
    if (!polling) return stats;
    auto state = open_sqlite_poll_state(path);
    if (!state) return std::unexpected(state.error());
    Poller poller(std::move(*poll_client), **queue, **state,
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
