// `sandgate agent`'s start-up (agent/daemon/daemon.hpp): the queue the configuration names (waited
// for while its database cannot be reached yet), recovery of this agent's previous life, the
// API, then the loop (agent/daemon/daemon.cpp).
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "agent/api/api.hpp"
#include "agent/api/http_server.hpp"
#include "agent/cli/launcher.hpp"
#include "agent/daemon/daemon.hpp"
#include "agent/daemon/daemon_loop.hpp"
#include "agent/daemon/daemon_queue.hpp"
#include "agent/daemon/github_rounds.hpp"
#include "agent/daemon/queue_open.hpp"
#include "agent/sandboxes/sandbox_dirs.hpp"
#include "agent/sandboxes/sandbox_manager.hpp"
#include "common/unix_socket.hpp"

namespace agent {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t k_max_request_body = 8 * 1024 * 1024;
constexpr std::chrono::seconds k_queue_open_backoff_cap{30};

// Workspaces of jobs no longer running (a previous life's, after recovery).
void remove_stale_workspaces(const AgentConfig& config, JobQueue& queue) {
    std::error_code ec;
    // trusted path: the agent's own list of workspaces (each removed without following links)
    for (const auto& entry : std::filesystem::directory_iterator(agent_dir(config) / "work", ec)) {
        const auto name = entry.path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::int64_t id = 0;
        const auto [end, parsed] = std::from_chars(name.data(), name.data() + name.size(), id);
        if (parsed != std::errc() || end != name.data() + name.size()) continue;
        auto job = queue.get(id);
        // A pool's job may run on another agent now: only a lease of ours keeps the directory.
        if (job && *job && (*job)->state == JobState::running && (*job)->lease_owner == config.id)
            continue;
        remove_tree(entry.path());
    }
}

// The API's listening socket; *where is the address it listens on (a TCP port 0 resolved to
// the port the kernel chose).
common::Expected<common::Fd> listen_api(const AgentConfig& config, std::string* where) {
    *where = config.listen;
    if (config.listen.rfind("127.0.0.1:", 0) == 0) {
        int port = -1;
        const std::string_view digits = std::string_view(config.listen).substr(10);
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
        if (ec != std::errc() || end != digits.data() + digits.size() || port < 0 || port > 65535)
            return common::fail(common::ErrorKind::invalid_input,
                                "listen: invalid port in '" + config.listen + "'");
        std::uint16_t bound = 0;
        auto listener = listen_loopback(static_cast<std::uint16_t>(port), &bound);
        if (listener) *where = "127.0.0.1:" + std::to_string(bound);
        return listener;
    }
    const auto path = api_socket_path(config);
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);  // trusted path: the agent's state
    ::chmod(path.parent_path().c_str(), 0700);
    return common::listen_unix(path);
}

// sandgate-full beside this binary (jobs run `sandgate-full gate`, GitHub rounds
// `sandgate-full agent-github`), or this binary itself when it is sandgate-full. The lean
// sandgate-agent can run neither, so without sandgate-full beside it the agent cannot start.
common::Expected<std::filesystem::path> full_binary() {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (self.filename() == k_full_binary_name) return self;
    const auto full = self.parent_path() / k_full_binary_name;
    if (std::filesystem::exists(full, ec)) return full;
    return common::fail(common::ErrorKind::unavailable,
                        full.string() +
                            " is missing: jobs and GitHub rounds run in it; install "
                            "sandgate-full beside " +
                            self.filename().string());
}

// The configured queue. A database that cannot be reached yet (a pool's PostgreSQL starting
// with the machine) is waited for with backoff, logged once; SIGTERM/SIGINT end the wait.
common::Expected<std::unique_ptr<JobQueue>> open_queue(const AgentConfig& config) {
    auto delay = std::chrono::seconds(1);
    bool logged = false;
    while (true) {
        auto queue = open_agent_queue(config);
        if (queue || queue.error().kind != common::ErrorKind::transient) return queue;
        if (!logged)
            spdlog::warn("job queue: {}; retrying (backoff up to {} s)", queue.error().message,
                         k_queue_open_backoff_cap.count());
        logged = true;
        const auto until = Clock::now() + delay;
        while (Clock::now() < until) {
            const int sig = wait_signal();
            if (sig == SIGTERM || sig == SIGINT) return queue;
        }
        delay = std::min<std::chrono::seconds>(delay * 2, k_queue_open_backoff_cap);
    }
}

// This agent's lines of /metrics (the queue's own, pool-wide when it is shared, come from
// the API).
std::string agent_metrics(const AgentConfig& config, const AgentStats& stats) {
    const std::string agent = "{agent=\"" + config.id + "\"}";
    std::string text;
    auto gauge = [&](const char* name, const char* help, const char* type, std::int64_t value) {
        text += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type +
                "\n" + name + agent + " " + std::to_string(value) + "\n";
    };
    gauge("sandgate_agent_jobs_running", "Jobs this agent runs.", "gauge", stats.running);
    gauge("sandgate_agent_max_jobs", "Jobs this agent runs at most.", "gauge",
          static_cast<std::int64_t>(config.max_jobs));
    gauge("sandgate_agent_claims_total", "Jobs this agent claimed since it started.", "counter",
          stats.claimed_total);
    gauge("sandgate_agent_claim_wait_milliseconds_total",
          "Sum over its claims of the time from queued to claimed.", "counter",
          stats.claim_latency_ms_sum);
    gauge("sandgate_agent_jobs_finished_total", "Job ends this agent recorded since it started.",
          "counter", stats.finished_total);
    gauge("sandgate_agent_pending_queue_writes",
          "Job ends and start reports kept while the queue is out of reach.", "gauge",
          stats.pending_writes);
    gauge("sandgate_agent_queue_errors_total", "Queue calls that failed.", "counter",
          stats.queue_errors_total);
    gauge("sandgate_agent_queue_up", "1 when the last queue call answered.", "gauge",
          stats.queue_up ? 1 : 0);
    return text;
}

}  // namespace

int run_daemon(const AgentConfig& config) {
    const auto full = full_binary();
    if (!full) {
        spdlog::error("{}", full.error().message);
        return 1;
    }
    auto queue = open_queue(config);
    if (!queue) {
        spdlog::error("job queue: {}", queue.error().message);
        return 1;
    }
    spdlog::info("agent {}: job queue {}", config.id, (*queue)->describe());
    auto recovered = (*queue)->recover_owner(config.id, config.on_lost_job, config.max_attempts);
    if (!recovered) {
        spdlog::error("recovery: {}", recovered.error().message);
        return 1;
    }
    for (const auto& job : *recovered)
        spdlog::warn("job {} was running when agent {} stopped: {}", job.job_id, config.id,
                     job.state == JobState::queued ? "re-queued" : "concluded");
    SandboxManager sandboxes({config.state_dir, {}, queue->get(), std::chrono::seconds(30)});
    sandboxes.reap_stale();
    remove_stale_workspaces(config, **queue);
    ApiConfig api_config;
    api_config.log_dir = agent_dir(config) / "logs";
    api_config.pr_label = config.pr_label;
    api_config.repositories = config.repositories;
    api_config.sandbox_policy.mode = config.sandbox;
    api_config.sandbox_policy.network = config.network;
    Wakeups wakeups;
    api_config.on_change = [&wakeups] { wakeups.post(Wakeups::k_claim | Wakeups::k_cancels); };
    AgentStats stats;
    api_config.agent_metrics = [&config, &stats] { return agent_metrics(config, stats); };
    for (auto [file, target] :
         {std::pair{config.token_file, &api_config.token},
          std::pair{config.webhook_secret_file, &api_config.webhook_secret}}) {
        if (!file) continue;
        auto secret = read_secret_file(*file);
        if (!secret) {
            spdlog::error("{}", secret.error().message);
            return 1;
        }
        *target = std::move(*secret);
    }
    Api api(std::move(api_config), **queue, sandboxes);
    std::string listening;
    auto listener = listen_api(config, &listening);
    if (!listener) {
        spdlog::error("api: {}", listener.error().message);
        return 1;
    }
    auto server = HttpServer::start(
        std::move(*listener), [&api](const HttpRequest& request) { return api.handle(request); },
        k_max_request_body);
    if (!server) {
        spdlog::error("api: {}", server.error().message);
        return 1;
    }
    spdlog::info("agent {} ready: api on {}, at most {} job(s)", config.id, listening,
                 config.max_jobs);
    // The token is read by each GitHub round; an unreadable one is a start-up error here.
    if (config.github_token_file)
        if (auto token = read_secret_file(*config.github_token_file); !token) {
            spdlog::error("github: {}", token.error().message);
            return 1;
        }
    // Woken by the queue when another agent queues work (SIGUSR1, as the API does).
    auto subscription = (*queue)->subscribe([&wakeups](QueueChange change) {
        wakeups.post(change == QueueChange::queued ? Wakeups::k_claim
                     : change == QueueChange::cancel_requested
                         ? Wakeups::k_cancels
                         : Wakeups::k_claim | Wakeups::k_cancels);
    });
    if (!subscription)
        spdlog::warn("job queue: no notifications ({}); polling", subscription.error().message);
    const auto notified = subscription && *subscription ? Notified::yes : Notified::no;
    GitHubRounds github(config, **queue, *full);
    const int status =
        run_loop(config, **queue, sandboxes, github, *full, stats, wakeups, notified);
    spdlog::info("agent {} stopped", config.id);
    return status;
}

}  // namespace agent
