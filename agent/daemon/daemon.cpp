// The daemon loop. One thread owns every job process; the API's threads only touch the queue
// (which serialises them) and wake the loop with SIGUSR1.
#include "agent/daemon/daemon.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "agent/api/api.hpp"
#include "agent/api/http_server.hpp"
#include "agent/cli/launcher.hpp"
#include "agent/daemon/daemon_loop.hpp"
#include "agent/daemon/daemon_queue.hpp"
#include "agent/daemon/github_rounds.hpp"
#include "agent/daemon/job_base.hpp"
#include "agent/daemon/job_process.hpp"
#include "agent/daemon/mirror_upkeep.hpp"
#include "agent/daemon/queue_open.hpp"
#include "agent/sandboxes/sandbox_dirs.hpp"
#include "agent/sandboxes/sandbox_manager.hpp"
#include "common/unix_socket.hpp"
#include "jobs/actions/action_store.hpp"
#include "jobs/git/git_mirror_layout.hpp"

namespace agent {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds k_tick{200};
constexpr std::chrono::seconds k_kill_grace{10};
constexpr std::chrono::hours k_mirror_gc_interval{24};
constexpr int k_exit_timeout = 124;
// With queue notifications (a pool's PostgreSQL) an idle agent claims when woken, when one of
// its jobs ended, and at least this often (a notification lost with a connection); without
// them (SQLite), every tick.
constexpr std::chrono::seconds k_claim_fallback{15};

struct Running {
    Job job;
    JobProcess process;
    Clock::time_point started;
    Clock::time_point next_heartbeat;
    std::optional<Clock::time_point> kill_at{};  // set once SIGTERM was sent
    std::optional<JobState> forced{};            // cancelled / timed_out, decided by us
    std::string forced_reason{};
    std::optional<SandboxInfo> sandbox{};  // the job's persistent sandbox
};

class Loop {
public:
    Loop(const AgentConfig& config, JobQueue& queue, SandboxManager& sandboxes,
         GitHubRounds& github, std::filesystem::path full_binary, AgentStats& stats,
         Wakeups& wakeups, Notified notified)
        : m_config(config),
          m_queue(queue),
          m_sandboxes(sandboxes),
          m_github(github),
          m_self(std::move(full_binary)),
          m_stats(stats),
          m_writes(queue, config.id, stats),
          m_wakeups(wakeups),
          m_notified(notified) {}

    int run() {
        auto next_reap = Clock::now();
        auto next_mirror_gc = Clock::now();  // at start, then daily
        std::optional<Clock::time_point> drain_deadline;
        while (true) {
            const int sig = wait_signal();
            if ((sig == SIGTERM || sig == SIGINT) && !drain_deadline) {
                drain_deadline = Clock::now() + m_config.drain;
                spdlog::info("draining: {} job(s) running, {} s to finish", m_running.size(),
                             m_config.drain.count());
            }
            // A wake-up: what it posted (an unknown sender's SIGUSR1: everything).
            unsigned woke = 0;
            if (sig == SIGUSR1) {
                woke = m_wakeups.bits.exchange(0);
                if (woke == 0) woke = Wakeups::k_claim | Wakeups::k_cancels;
            }
            // A cancel requested (an API call, another agent, a GitHub round that ended, maybe
            // having cancelled jobs): look for cancels now, not at the next heartbeat.
            const bool round_ended = m_github.tick(drain_deadline ? Draining::yes : Draining::no);
            if ((woke & Wakeups::k_cancels) != 0 || round_ended)
                for (auto& [id, running] : m_running) running.next_heartbeat = Clock::now();
            if (drain_deadline && Clock::now() >= *drain_deadline)
                for (auto& [id, running] : m_running)
                    force(running, JobState::cancelled, "cancelled: the agent is shutting down");
            m_writes.retry();
            watch();
            if (!drain_deadline) {
                if (claim_due(woke)) claim();
            } else if (m_running.empty()) {
                return finish_drain(*drain_deadline);
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
    // `woke`: the Wakeups bits of this turn (k_claim: a job was enqueued).
    bool claim_due(unsigned woke) {
        if (m_notified == Notified::no) return true;
        const auto now = Clock::now();
        if ((woke & Wakeups::k_claim) == 0 && !m_slot_freed && now < m_next_claim) return false;
        m_slot_freed = false;
        m_next_claim = now + k_claim_fallback;
        return true;
    }

    void claim() {
        while (m_running.size() < m_config.max_jobs) {
            auto job = m_queue.claim(m_config.id, m_config.lease, m_config.max_jobs);
            if (!job) {
                m_writes.failed("claim", job.error());
                return;
            }
            m_writes.answered();
            if (!*job) return;
            ++m_stats.claimed_total;
            m_stats.claim_latency_ms_sum +=
                std::max<std::int64_t>(0, system_now_ms() - (**job).created_ms);
            start(std::move(**job));
        }
    }

    // The drain's last part, once no job runs: every report this agent owes is sent before it
    // exits, while the drain deadline lasts (the conclusions of jobs cancelled at the deadline
    // get k_kill_grace more); what is still owed then stays queued for the next start.
    int finish_drain(Clock::time_point deadline) {
        const auto until = Clock::now() < deadline ? deadline : Clock::now() + k_kill_grace;
        std::int64_t owed = 0;
        while (true) {
            const bool written = m_writes.retry();
            auto left = m_queue.owed_reports(m_config.id);
            owed = left ? *left : -1;
            if (written && owed == 0) break;
            if (Clock::now() >= until) break;
            m_github.tick(Draining::yes);
            wait_signal();
        }
        m_github.finish(k_kill_grace);
        if (m_writes.pending() > 0)
            spdlog::error(
                "drained: {} job end(s) could not be recorded (the queue is out of reach); "
                "the pool recovers them when their leases expire",
                m_writes.pending());
        if (owed != 0)
            spdlog::warn(
                "drained: {} report(s) still owed to GitHub; they stay queued and are sent "
                "after the next start",
                owed < 0 ? std::string("some") : std::to_string(owed));
        return 0;
    }

    void start(Job job) {
        const auto log = job_log_path(agent_dir(m_config) / "logs", job.id);
        std::error_code ec;
        // trusted path: the agent's state
        std::filesystem::create_directories(job_report_path(m_config, job.id).parent_path(), ec);
        auto env = job_environment(m_config, job);
        std::optional<SandboxInfo> box;
        // Under job.network: allowlist each step has a wrap and a proxy of its own (its egress
        // is evidence of that step), not a job sandbox.
        if (m_config.persistent_sandbox && m_config.allow_egress.empty()) {
            auto created = create_sandbox(job, env);
            if (!created) {
                spdlog::error("job {}: no sandbox: {}", job.id, created.error().message);
                m_writes.complete(
                    job.id, JobState::failed,
                    "the job sandbox could not be created: " + created.error().message, "{}");
                remove_workspace(job.id);
                return;
            }
            box = std::move(*created);
        }
        auto process = JobProcess::start(job_argv(m_config, job, m_self), env, log);
        if (!process) {
            spdlog::error("job {}: cannot start: {}", job.id, process.error().message);
            m_writes.complete(job.id, JobState::failed,
                              "the job could not start: " + process.error().message, "{}");
            teardown(job.id, box);
            return;
        }
        spdlog::info("job {}: started {} {} (attempt {}, pid {})", job.id, job.spec.key.repository,
                     job.spec.key.sha, job.spec.key.attempt, process->pid());
        if (m_config.github_token_file) {
            m_writes.start_report(job.id);
            m_github.wake();
        }
        const auto now = Clock::now();
        const auto id = job.id;
        m_running.emplace(id, Running{.job = std::move(job),
                                      .process = std::move(*process),
                                      .started = now,
                                      .next_heartbeat = now + m_config.lease / 3,
                                      .sandbox = std::move(box)});
        m_stats.running = static_cast<std::int64_t>(m_running.size());
    }

    // The job's sandbox: its root is the job's workspace (where the job checks out and keeps
    // its TMPDIR, so every path a step is given lies inside it). Its socket and identity go to
    // the job process, whose steps are exec requests there (agent/cli/job_executor.hpp).
    common::Expected<SandboxInfo> create_sandbox(const Job& job, sandbox::Environment& env) {
        auto workspace = job_workspace(m_config, job.id);
        std::error_code ec;
        // trusted path: made before the job's first step
        std::filesystem::create_directories(workspace / "tmp", ec);
        if (!ec) workspace = std::filesystem::canonical(workspace, ec);
        if (ec)
            return common::fail(common::ErrorKind::permanent,
                                workspace.string() + ": " + ec.message());
        SandboxIdentity identity{
            job.spec.key.repository, job.spec.key.sha, job.id, job.spec.key.attempt,
            job.spec.key.workflow_job.empty() ? "gate" : job.spec.key.workflow_job};
        SandboxOptions options;
        options.policy.mode = m_config.sandbox;
        options.policy.network = m_config.network;
        options.worktree = workspace;
        // `sandgate gate` checks out in the workspace, its objects read through alternates
        // from the mirrors it fetches outside: only this repository's scope (its submodules'
        // mirrors, found after the fetch, show through the live bind), never another's.
        auto scope = jobs::make_mirror_scope(m_config.state_dir,
                                             repository_url(m_config, job.spec.key.repository));
        // A remote no mirror can be made of binds nothing (the gate refuses such a --repo).
        if (scope)
            options.policy.read_only.push_back(*scope);
        else if (scope.error().kind != common::ErrorKind::invalid_input)
            return std::unexpected(scope.error());
        // Remote actions: the gate resolves and unpacks them outside, under the state directory
        // (jobs/actions/action_store.hpp); their read-only trees show through this live bind.
        auto trees = jobs::ActionStore::default_dirs(m_config.state_dir).work / "trees";
        std::filesystem::create_directories(trees, ec);  // trusted path: the agent's own state
        if (!ec) trees = std::filesystem::canonical(trees, ec);
        if (ec)
            return common::fail(common::ErrorKind::permanent, trees.string() + ": " + ec.message());
        options.policy.read_only.push_back(trees);
        options.ttl = std::chrono::duration_cast<std::chrono::seconds>(m_config.job_timeout) +
                      k_kill_grace * 6;
        options.job = job.id;
        for (const auto& [name, value] : env) options.env_names.push_back(name);
        auto box = m_sandboxes.create(identity, options);
        if (!box) return box;
        env.emplace_back("SANDGATE_BROKER_SOCKET", box->socket.string());
        env.emplace_back("SANDGATE_BROKER_IDENTITY", identity.canonical());
        env.emplace_back("SANDGATE_JOB_WORKSPACE", workspace.string());
        for (auto& [name, value] : env)
            if (name == "TMPDIR") value = (workspace / "tmp").string();
        if (std::none_of(env.begin(), env.end(),
                         [](const auto& pair) { return pair.first == "TMPDIR"; }))
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
    // directories opened up first (sandbox/access/safe_access.hpp).
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
                m_stats.running = static_cast<std::int64_t>(m_running.size());
                m_slot_freed = true;
                continue;
            }
            if (running.kill_at && now >= *running.kill_at) running.process.signal_group(SIGKILL);
            if (now - running.started >= m_config.job_timeout)
                force(
                    running, JobState::timed_out,
                    "timed out after " + std::to_string(m_config.job_timeout.count()) + " minutes");
            if (now >= running.next_heartbeat) heartbeat(running);
            ++it;
        }
    }

    void heartbeat(Running& running) {
        running.next_heartbeat = Clock::now() + m_config.lease / 3;
        auto beat = m_queue.heartbeat(running.job.id, m_config.id, m_config.lease);
        if (!beat) {
            // Out of reach: the job goes on (its lease outlives a short outage).
            m_writes.failed("job " + std::to_string(running.job.id) + ": heartbeat", beat.error());
            if (beat.error().kind == common::ErrorKind::permanent)
                force(running, JobState::cancelled, "lease lost");
            return;
        }
        m_writes.answered();
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
                                    : "the job command died of signal " +
                                          std::to_string(exit.signal.value_or(0));
        }
        nlohmann::ordered_json result;
        result["exit_code"] = exit.exit_code ? nlohmann::ordered_json(*exit.exit_code) : nullptr;
        result["signal"] = exit.signal ? nlohmann::ordered_json(*exit.signal) : nullptr;
        result["duration_ms"] =
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - running.started)
                .count();
        // Tear down first: a job is only seen finished once its sandbox and workspace are gone
        // (a crash in between leaves it running, and the lease recovery concludes it).
        teardown(running.job.id, running.sandbox);
        spdlog::info("job {}: {} {}", running.job.id, to_string(state), reason);
        m_writes.complete(running.job.id, state, reason, result.dump());
        m_github.wake();
    }

    // On this thread, so no job starts (creating its scope) while mirrors are collected.
    void collect_mirror_cache() {
        std::vector<std::string> repositories;
        for (const auto& [id, running] : m_running)
            repositories.push_back(running.job.spec.key.repository);
        m_mirrors.collect(repositories);
    }

    void housekeeping() {
        if (auto reaped = m_sandboxes.reap_expired(); reaped > 0)
            spdlog::info("reaped {} expired sandbox(es)", reaped);
        auto recovered = m_queue.recover_expired(m_config.on_lost_job, m_config.max_attempts);
        if (!recovered)
            m_writes.failed("lease recovery", recovered.error());
        else if (!recovered->empty())
            for (const auto& job : *recovered)
                spdlog::info("job {}: its lease expired; {}", job.job_id,
                             job.state == JobState::queued ? "re-queued" : "concluded");
        m_github.wake();
    }

    const AgentConfig& m_config;
    JobQueue& m_queue;
    SandboxManager& m_sandboxes;
    GitHubRounds& m_github;
    std::filesystem::path m_self;
    AgentStats& m_stats;
    QueueWrites m_writes;
    Wakeups& m_wakeups;
    Notified m_notified;
    bool m_slot_freed = false;
    Clock::time_point m_next_claim{};
    std::map<std::int64_t, Running> m_running;
    MirrorUpkeep m_mirrors{m_config};
};

}  // namespace

int wait_signal() {
    sigset_t signals;
    sigemptyset(&signals);
    for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGCHLD}) sigaddset(&signals, sig);
    const timespec tick{0, std::chrono::nanoseconds(k_tick).count()};
    return ::sigtimedwait(&signals, nullptr, &tick);
}

int run_loop(const AgentConfig& config, JobQueue& queue, SandboxManager& sandboxes,
             GitHubRounds& github, const std::filesystem::path& full_binary, AgentStats& stats,
             Wakeups& wakeups, Notified notified) {
    Loop loop(config, queue, sandboxes, github, full_binary, stats, wakeups, notified);
    return loop.run();
}

std::filesystem::path job_report_path(const AgentConfig& config, std::int64_t job_id) {
    return agent_dir(config) / "reports" / (std::to_string(job_id) + ".json");
}

std::filesystem::path agent_dir(const AgentConfig& config) {
    return config.state_dir / "agent";
}

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
    std::vector<std::string> argv = {
        self.string(), "gate",
        "--repo",      repository_url(config, job.spec.key.repository),
        "--sha",       job.spec.key.sha,
        "--event",     job.spec.event == "api" ? "push" : job.spec.event,
        "--state-dir", config.state_dir.string(),
        "--sandbox",   std::string(sandbox::to_string(config.sandbox)),
        "--network",   std::string(job_network(config))};
    for (const auto& host : config.allow_egress) argv.insert(argv.end(), {"--allow-egress", host});
    for (const auto& range : config.allow_egress_ranges)
        argv.insert(argv.end(), {"--allow-egress-range", range});
    argv.insert(argv.end(), {"--report", job_report_path(config, job.id).string()});
    if (!job.spec.ref.empty()) argv.insert(argv.end(), {"--ref", job.spec.ref});
    if (!job.spec.key.workflow_job.empty())
        argv.insert(argv.end(), {"-j", job.spec.key.workflow_job});
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
    // Where the job process records its steps' evidence: the state directory's queue, or a
    // pool's (never a password).
    env.emplace_back("SANDGATE_STATE_DIR", config.state_dir.string());
    if (!config.queue_url.empty()) env.emplace_back(k_queue_url_variable, config.queue_url);
    if (config.queue_password_file)
        env.emplace_back(k_queue_password_file_variable, config.queue_password_file->string());
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

}  // namespace agent
