// The daemon loop. One thread owns every job process; the API's threads only touch the queue
// (which serialises them) and wake the loop with SIGUSR1.
#include "agent/daemon.hpp"

#include <charconv>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "agent/api.hpp"
#include "agent/github_rounds.hpp"
#include "agent/http_server.hpp"
#include "agent/job_base.hpp"
#include "agent/job_process.hpp"
#include "agent/launcher.hpp"
#include "agent/mirror_upkeep.hpp"
#include "agent/sandbox_dirs.hpp"
#include "agent/sandbox_manager.hpp"
#include "jobs/git_mirror_layout.hpp"
#include "sandbox/unix_socket.hpp"

namespace agent {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds k_tick{200};
constexpr std::chrono::seconds k_kill_grace{10};
constexpr std::chrono::hours k_mirror_gc_interval{24};
constexpr std::size_t k_max_request_body = 8 * 1024 * 1024;
constexpr int k_exit_timeout = 124;

struct Running {
    Job job;
    JobProcess process;
    Clock::time_point started;
    Clock::time_point next_heartbeat;
    std::optional<Clock::time_point> kill_at;   // set once SIGTERM was sent
    std::optional<JobState> forced;             // cancelled / timed_out, decided by us
    std::string forced_reason;
    std::optional<SandboxInfo> sandbox;         // the job's persistent sandbox
};

class Loop {
public:
    Loop(const AgentConfig& config, JobQueue& queue, SandboxManager& sandboxes,
         GitHubRounds& github, std::filesystem::path full_binary)
        : m_config(config),
          m_queue(queue),
          m_sandboxes(sandboxes),
          m_github(github),
          m_self(std::move(full_binary)) {}

    int run() {
        sigset_t signals;
        sigemptyset(&signals);
        for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGCHLD}) sigaddset(&signals, sig);
        auto next_reap = Clock::now();
        auto next_mirror_gc = Clock::now();  // at start, then daily
        std::optional<Clock::time_point> drain_deadline;
        while (true) {
            const timespec tick{0, std::chrono::nanoseconds(k_tick).count()};
            const int sig = ::sigtimedwait(&signals, nullptr, &tick);
            if ((sig == SIGTERM || sig == SIGINT) && !drain_deadline) {
                drain_deadline = Clock::now() + m_config.drain;
                spdlog::info("draining: {} job(s) running, {} s to finish", m_running.size(),
                             m_config.drain.count());
            }
            // A wake-up (an API call, a GitHub round that ended, maybe having cancelled jobs):
            // look for cancels now, not at the next heartbeat.
            const bool round_ended = m_github.tick(drain_deadline ? Draining::yes : Draining::no);
            if (sig == SIGUSR1 || round_ended)
                for (auto& [id, running] : m_running) running.next_heartbeat = Clock::now();
            if (drain_deadline && Clock::now() >= *drain_deadline)
                for (auto& [id, running] : m_running)
                    force(running, JobState::cancelled, "cancelled: the agent is shutting down");
            watch();
            if (!drain_deadline) claim();
            else if (m_running.empty()) {
                m_github.finish(k_kill_grace);
                return 0;
            }
            if (Clock::now() >= next_reap) {
                housekeeping();
                next_reap = Clock::now() + m_config.reap_interval;
            }
            if (!drain_deadline && Clock::now() >= next_mirror_gc) {
                collect_mirror_cache();
                next_mirror_gc = Clock::now() + k_mirror_gc_interval;
            }
        }
    }

private:
    void claim() {
        while (m_running.size() < m_config.max_jobs) {
            auto job = m_queue.claim(m_config.id, m_config.lease, m_config.max_jobs);
            if (!job) {
                spdlog::warn("claim: {}", job.error().message);
                return;
            }
            if (!*job) return;
            start(std::move(**job));
        }
    }

    void start(Job job) {
        const auto log = job_log_path(agent_dir(m_config) / "logs", job.id);
        std::error_code ec;
        std::filesystem::create_directories(job_report_path(m_config, job.id).parent_path(), ec);  // trusted path: the agent's state
        auto env = job_environment(m_config, job);
        std::optional<SandboxInfo> box;
        if (m_config.persistent_sandbox) {
            auto created = create_sandbox(job, env);
            if (!created) {
                spdlog::error("job {}: no sandbox: {}", job.id, created.error().message);
                (void)m_queue.complete(job.id, m_config.id, JobState::failed,
                                       "the job sandbox could not be created: " +
                                           created.error().message, "{}");
                remove_workspace(job.id);
                return;
            }
            box = std::move(*created);
        }
        auto process = JobProcess::start(job_argv(m_config, job, m_self), env, log);
        if (!process) {
            spdlog::error("job {}: cannot start: {}", job.id, process.error().message);
            (void)m_queue.complete(job.id, m_config.id, JobState::failed,
                                   "the job could not start: " + process.error().message, "{}");
            teardown(job.id, box);
            return;
        }
        spdlog::info("job {}: started {} {} (attempt {}, pid {})", job.id, job.spec.key.repository,
                     job.spec.key.sha, job.spec.key.attempt, process->pid());
        if (m_config.github_token_file) {
            if (auto queued = m_queue.add_report(job.id, "start", "{}"); !queued)
                spdlog::warn("job {}: {}", job.id, queued.error().message);
            m_github.wake();
        }
        const auto now = Clock::now();
        const auto id = job.id;
        m_running.emplace(id, Running{std::move(job), std::move(*process), now,
                                      now + m_config.lease / 3, std::nullopt, std::nullopt, "",
                                      std::move(box)});
    }

    // The job's sandbox: its root is the job's workspace (where the job checks out and keeps
    // its TMPDIR, so every path a step is given lies inside it). Its socket and identity go to
    // the job process, whose steps are exec requests there (agent/job_executor.hpp).
    sandbox::Expected<SandboxInfo> create_sandbox(const Job& job, sandbox::Environment& env) {
        auto workspace = job_workspace(m_config, job.id);
        std::error_code ec;
        std::filesystem::create_directories(workspace / "tmp", ec);  // trusted path: made before the job's first step
        if (!ec) workspace = std::filesystem::canonical(workspace, ec);
        if (ec) return sandbox::fail(sandbox::ErrorKind::permanent, workspace.string() + ": " + ec.message());
        SandboxIdentity identity{job.spec.key.repository, job.spec.key.sha, job.id,
                                 job.spec.key.attempt,
                                 job.spec.key.workflow_job.empty() ? "gate" : job.spec.key.workflow_job};
        SandboxOptions options;
        options.policy.mode = m_config.sandbox;
        options.policy.network = m_config.network;
        options.worktree = workspace;
        // `sandgate gate` checks out in the workspace, its objects read through alternates
        // from the mirrors it fetches outside: only this repository's scope (its submodules'
        // mirrors, found after the fetch, show through the live bind), never another's.
        auto scope = jobs::make_mirror_scope(m_config.state_dir, repository_url(m_config, job.spec.key.repository));
        // A remote no mirror can be made of binds nothing (the gate refuses such a --repo).
        if (scope) options.policy.read_only.push_back(*scope);
        else if (scope.error().kind != sandbox::ErrorKind::invalid_input) return std::unexpected(scope.error());
        options.ttl = std::chrono::duration_cast<std::chrono::seconds>(m_config.job_timeout) + k_kill_grace * 6;
        options.job = job.id;
        for (const auto& [name, value] : env) options.env_names.push_back(name);
        auto box = m_sandboxes.create(identity, options);
        if (!box) return box;
        env.emplace_back("SANDGATE_BROKER_SOCKET", box->socket.string());
        env.emplace_back("SANDGATE_BROKER_IDENTITY", identity.canonical());
        env.emplace_back("SANDGATE_JOB_WORKSPACE", workspace.string());
        env.emplace_back("SANDGATE_STATE_DIR", m_config.state_dir.string());
        for (auto& [name, value] : env)
            if (name == "TMPDIR") value = (workspace / "tmp").string();
        if (std::none_of(env.begin(), env.end(), [](const auto& pair) { return pair.first == "TMPDIR"; }))
            env.emplace_back("TMPDIR", (workspace / "tmp").string());
        return box;
    }

    // Idempotent: the sandbox destroyed (its broker stopped), the workspace removed.
    void teardown(std::int64_t id, const std::optional<SandboxInfo>& box) {
        if (box)
            if (auto ok = m_sandboxes.destroy(box->id); !ok)
                spdlog::warn("job {}: sandbox teardown: {}", id, ok.error().message);
        remove_workspace(id);
    }

    // The workspace is the job's steps': removed without following a link they left, closed
    // directories opened up first (sandbox/safe_access.hpp).
    void remove_workspace(std::int64_t id) { remove_tree(job_workspace(m_config, id)); }

    void force(Running& running, JobState state, std::string reason) {
        if (running.kill_at) return;
        running.forced = state;
        running.forced_reason = std::move(reason);
        running.process.signal_group(SIGTERM);
        running.kill_at = Clock::now() + k_kill_grace;
    }

    void watch() {
        const auto now = Clock::now();
        for (auto it = m_running.begin(); it != m_running.end();) {
            auto& running = it->second;
            if (auto exit = running.process.poll()) {
                finish(running, *exit);
                it = m_running.erase(it);
                continue;
            }
            if (running.kill_at && now >= *running.kill_at) running.process.signal_group(SIGKILL);
            if (now - running.started >= m_config.job_timeout)
                force(running, JobState::timed_out, "timed out after " +
                                                        std::to_string(m_config.job_timeout.count()) +
                                                        " minutes");
            if (now >= running.next_heartbeat) heartbeat(running);
            ++it;
        }
    }

    void heartbeat(Running& running) {
        running.next_heartbeat = Clock::now() + m_config.lease / 3;
        auto beat = m_queue.heartbeat(running.job.id, m_config.id, m_config.lease);
        if (!beat) {
            spdlog::warn("job {}: {}", running.job.id, beat.error().message);
            if (beat.error().kind == sandbox::ErrorKind::permanent)
                force(running, JobState::cancelled, "lease lost");
            return;
        }
        if (beat->cancel_requested) {
            auto job = m_queue.get(running.job.id);
            const std::string why = job && *job ? (*job)->reason : "cancelled";
            force(running, JobState::cancelled, why);
        }
    }

    void finish(Running& running, const JobExit& exit) {
        JobState state = JobState::failed;
        std::string reason;
        if (running.forced) {
            state = *running.forced;
            reason = running.forced_reason;
        } else if (exit.exit_code == 0) {
            state = JobState::succeeded;
        } else if (exit.exit_code == 1) {
            reason = "the gate failed";
        } else if (exit.exit_code == k_exit_timeout) {
            state = JobState::timed_out;
            reason = "a step timed out";
        } else {
            reason = exit.exit_code ? "the job command exited " + std::to_string(*exit.exit_code)
                                    : "the job command died of signal " + std::to_string(exit.signal.value_or(0));
        }
        nlohmann::ordered_json result;
        result["exit_code"] = exit.exit_code ? nlohmann::ordered_json(*exit.exit_code) : nullptr;
        result["signal"] = exit.signal ? nlohmann::ordered_json(*exit.signal) : nullptr;
        result["duration_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    Clock::now() - running.started)
                                    .count();
        // Tear down first: a job is only seen finished once its sandbox and workspace are gone
        // (a crash in between leaves it running, and the lease recovery concludes it).
        teardown(running.job.id, running.sandbox);
        auto ok = m_queue.complete(running.job.id, m_config.id, state, reason, result.dump());
        spdlog::info("job {}: {} {}", running.job.id, to_string(state), reason);
        if (!ok) spdlog::warn("job {}: {}", running.job.id, ok.error().message);
        m_github.wake();
    }

    // On this thread, so no job starts (creating its scope) while mirrors are collected.
    void collect_mirror_cache() {
        std::vector<std::string> repositories;
        for (const auto& [id, running] : m_running) repositories.push_back(running.job.spec.key.repository);
        m_mirrors.collect(repositories);
    }

    void housekeeping() {
        if (auto reaped = m_sandboxes.reap_expired(); reaped > 0)
            spdlog::info("reaped {} expired sandbox(es)", reaped);
        auto recovered = m_queue.recover_expired(m_config.on_lost_job, m_config.max_attempts);
        if (recovered && !recovered->empty())
            spdlog::info("recovered {} job(s) whose lease expired", recovered->size());
        m_github.wake();
    }

    const AgentConfig& m_config;
    JobQueue& m_queue;
    SandboxManager& m_sandboxes;
    GitHubRounds& m_github;
    std::filesystem::path m_self;
    std::map<std::int64_t, Running> m_running;
    MirrorUpkeep m_mirrors{m_config};
};

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
        if (job && *job && (*job)->state == JobState::running) continue;
        remove_tree(entry.path());
    }
}

// The API's listening socket; *where is the address it listens on (a TCP port 0 resolved to
// the port the kernel chose).
sandbox::Expected<sandbox::Fd> listen_api(const AgentConfig& config, std::string* where) {
    *where = config.listen;
    if (config.listen.rfind("127.0.0.1:", 0) == 0) {
        int port = -1;
        const std::string_view digits = std::string_view(config.listen).substr(10);
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
        if (ec != std::errc() || end != digits.data() + digits.size() || port < 0 || port > 65535)
            return sandbox::fail(sandbox::ErrorKind::invalid_input, "listen: invalid port in '" + config.listen + "'");
        std::uint16_t bound = 0;
        auto listener = listen_loopback(static_cast<std::uint16_t>(port), &bound);
        if (listener) *where = "127.0.0.1:" + std::to_string(bound);
        return listener;
    }
    const auto path = api_socket_path(config);
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);  // trusted path: the agent's state
    ::chmod(path.parent_path().c_str(), 0700);
    return sandbox::listen_unix(path);
}

// sandgate-full beside this binary (jobs run `sandgate-full gate`, GitHub rounds
// `sandgate-full agent-github`), or this binary itself when it is sandgate-full. The lean
// sandgate-agent can run neither, so without sandgate-full beside it the agent cannot start.
sandbox::Expected<std::filesystem::path> full_binary() {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (self.filename() == k_full_binary_name) return self;
    const auto full = self.parent_path() / k_full_binary_name;
    if (std::filesystem::exists(full, ec)) return full;
    return sandbox::fail(sandbox::ErrorKind::unavailable,
                         full.string() + " is missing: jobs and GitHub rounds run in it; install "
                                         "sandgate-full beside " + self.filename().string());
}

}  // namespace

std::filesystem::path job_report_path(const AgentConfig& config, std::int64_t job_id) {
    return agent_dir(config) / "reports" / (std::to_string(job_id) + ".json");
}

std::filesystem::path agent_dir(const AgentConfig& config) { return config.state_dir / "agent"; }

std::filesystem::path job_workspace(const AgentConfig& config, std::int64_t job_id) {
    return agent_dir(config) / "work" / std::to_string(job_id);
}

std::filesystem::path api_socket_path(const AgentConfig& config) {
    if (config.listen.rfind("unix:", 0) == 0) return config.listen.substr(5);
    return agent_dir(config) / "run" / "api.sock";
}

std::vector<std::string> job_argv(const AgentConfig& config, const Job& job,
                                  const std::filesystem::path& self) {
    if (!config.job_command.empty()) return config.job_command;
    std::vector<std::string> argv = {self.string(), "gate", "--repo",
                                     repository_url(config, job.spec.key.repository), "--sha",
                                     job.spec.key.sha, "--event",
                                     job.spec.event == "api" ? "push" : job.spec.event,
                                     "--state-dir", config.state_dir.string(), "--sandbox",
                                     std::string(sandbox::to_string(config.sandbox)), "--network",
                                     std::string(sandbox::to_string(config.network)),
                                     "--report", job_report_path(config, job.id).string()};
    if (!job.spec.ref.empty()) argv.insert(argv.end(), {"--ref", job.spec.ref});
    if (!job.spec.key.workflow_job.empty()) argv.insert(argv.end(), {"-j", job.spec.key.workflow_job});
    for (auto& argument : base_arguments(job.spec)) argv.push_back(std::move(argument));
    return argv;
}

sandbox::Environment job_environment(const AgentConfig& config, const Job& job) {
    sandbox::Environment env;
    for (const char* name : {"PATH", "HOME", "LANG", "TZ", "XDG_STATE_HOME", "TMPDIR"})
        if (const char* value = std::getenv(name)) env.emplace_back(name, value);
    env.emplace_back("SANDGATE_JOB_ID", std::to_string(job.id));
    env.emplace_back("SANDGATE_JOB_REPOSITORY", job.spec.key.repository);
    env.emplace_back("SANDGATE_JOB_SHA", job.spec.key.sha);
    env.emplace_back("SANDGATE_JOB_REF", job.spec.ref);
    env.emplace_back("SANDGATE_JOB_EVENT", job.spec.event);
    env.emplace_back("SANDGATE_JOB_WORKFLOW_JOB", job.spec.key.workflow_job);
    env.emplace_back("SANDGATE_JOB_ATTEMPT", std::to_string(job.spec.key.attempt));
    env.emplace_back("SANDGATE_JOB_CLONE_URL", repository_url(config, job.spec.key.repository));
    env.emplace_back("SANDGATE_JOB_REPORT", job_report_path(config, job.id).string());
    const JobBase base = recorded_base(job.spec);
    env.emplace_back("SANDGATE_JOB_BASE_SHA", base.sha);
    env.emplace_back("SANDGATE_JOB_BASE_REF", base.ref);
    return env;
}

void block_stop_signals() {
    sigset_t signals;
    sigemptyset(&signals);
    for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGCHLD}) sigaddset(&signals, sig);
    ::pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

int run_daemon(const AgentConfig& config) {
    const auto full = full_binary();
    if (!full) {
        spdlog::error("{}", full.error().message);
        return 1;
    }
    auto queue = open_sqlite_queue(default_queue_path(config.state_dir));
    if (!queue) {
        spdlog::error("job queue: {}", queue.error().message);
        return 1;
    }
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
    api_config.on_change = [] { ::kill(::getpid(), SIGUSR1); };
    for (auto [file, target] : {std::pair{config.token_file, &api_config.token},
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
    GitHubRounds github(config, **queue, *full);
    Loop loop(config, **queue, sandboxes, github, *full);
    const int status = loop.run();
    spdlog::info("agent {} stopped", config.id);
    return status;
}

}  // namespace agent
