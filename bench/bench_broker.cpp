// bench_broker: one small step (`true`) through a job sandbox's broker, against a fresh bwrap
// per step and against a plain fork/exec, all measured in this run; the agent's idle RSS; and
// 100 small jobs through the agent end to end (job.command = /bin/true), without and with a
// persistent job sandbox per job; and the idle RSS of an agent that polls GitHub (an
// unreachable 127.0.0.1 port, every second), measured between its rounds, with the peak of
// the short-lived `sandgate-full agent-github` round processes it starts.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "agent/sandboxes/sandbox_manager.hpp"
#include "agent/store/job_store.hpp"
#include "sandbox/broker/broker.hpp"
#include "sandbox/process/run.hpp"
#include "tests/support/numbers.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
constexpr int k_steps = 400;
constexpr int k_rounds = 10;
constexpr int k_jobs = 100;
double g_ping_us = 0;  // a broker ping (transport only), measured in broker()
std::string g_reaper;  // who reaps the steps' orphans, as the broker says

double per_step_us(Clock::time_point start, int count) {
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / count;
}

double fork_exec(int count) {
    const auto start = Clock::now();
    for (int i = 0; i < count; ++i) {
        pid_t pid = 0;
        char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
        if (::posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, environ) != 0) return -1;
        ::waitpid(pid, nullptr, 0);
    }
    return per_step_us(start, count);
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

double fresh_bwrap() {
    sandbox::RunRequest request;
    request.argv = {"true"};
    request.env = sandbox::child_environment(sandbox::current_environment(), {}, {});
    const int count = 50;
    const auto start = Clock::now();
    for (int i = 0; i < count; ++i) {
        auto result = sandbox::run(request);
        if (result.error || result.exit_code != 0) {
            std::fprintf(stderr, "bwrap step failed: %s\n",
                         result.error ? result.error->message.c_str() : "exit");
            return -1;
        }
    }
    return per_step_us(start, count);
}

struct StepFigures {
    double plain_us = -1;   // fork/exec, median of the rounds
    double broker_us = -1;  // through the broker, median of the rounds
    double ratio = -1;      // median of the rounds' broker / fork-exec
};

// Rounds of plain fork/exec and brokered steps, interleaved, so that a change of the machine's
// load touches both sides of a ratio alike.
StepFigures steps(const std::filesystem::path& dir) {
    agent::SandboxManager manager(
        {dir / "state", SANDGATE_BINARY, nullptr, std::chrono::seconds(30)});
    agent::SandboxIdentity identity{"bench/repo", std::string(40, 'a'), 1, 1, "bench"};
    auto box = manager.create(identity, {});
    if (!box) {
        std::fprintf(stderr, "sandbox: %s\n", box.error().message.c_str());
        return {};
    }
    // The transport alone: a ping is a connection and a JSON round trip, and runs nothing.
    sandbox::BrokerRequest ping;
    ping.op = sandbox::BrokerOp::ping;
    auto start = Clock::now();
    for (int i = 0; i < k_steps; ++i)
        if (!sandbox::broker_call(box->socket, ping)) return {};
    g_ping_us = per_step_us(start, k_steps);
    if (auto status = sandbox::broker_call(box->socket, ping); status && status->status)
        g_reaper = status->status->reaper;
    sandbox::ExecRequest request;
    request.argv = {"true"};
    const int per_round = k_steps / k_rounds;
    std::vector<double> plain, brokered, ratios;
    for (int round = 0; round < k_rounds; ++round) {
        plain.push_back(fork_exec(per_round));
        start = Clock::now();
        for (int i = 0; i < per_round; ++i) {
            auto reply = manager.exec(box->id, identity, request);
            if (!reply || reply->refusal) return {};
        }
        brokered.push_back(per_step_us(start, per_round));
        ratios.push_back(brokered.back() / plain.back());
    }
    return {median(plain), median(brokered), median(ratios)};
}

// `github`: extra YAML (a github: section) for the config.
pid_t start_agent(const std::filesystem::path& dir, bool persistent_sandbox,
                  const std::string& github = "") {
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "agent.yaml")
        << "agent:\n  id: bench\n  state_dir: " << (dir / "state").string()
        << "\n  max_jobs: 4\njob:\n  command: [/bin/true]\n"
        << "  persistent_sandbox: " << (persistent_sandbox ? "true" : "false") << "\n"
        << github;
    const pid_t pid = ::fork();
    if (pid == 0) {
        const std::string config = (dir / "agent.yaml").string();
        // The agent's log lines (one per job) to a file, not between the figures.
        const int log =
            ::open((dir / "agent.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (log >= 0) ::dup2(log, 2);
        ::execl(SANDGATE_BINARY, SANDGATE_BINARY, "agent", "--config", config.c_str(),
                static_cast<char*>(nullptr));
        ::_exit(127);
    }
    while (!std::filesystem::exists(dir / "state" / "agent" / "run" / "api.sock"))
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return pid;
}

// A field of /proc/PID/status in KiB (VmRSS, RssAnon, RssFile); -1 when absent.
long status_kib(pid_t pid, const std::string& field) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind(field + ":", 0) == 0)
            return tests::to_number<long>(std::string_view(line).substr(field.size() + 1))
                .value_or(-1);
    return -1;
}

// The children of `parent` whose command line holds `word`.
std::vector<pid_t> children_running(pid_t parent, const std::string& word) {
    std::vector<pid_t> found;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        const auto name = entry.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream cmdline(entry.path() / "cmdline");
        std::ostringstream text_stream;
        text_stream << cmdline.rdbuf();
        const std::string text = text_stream.str();
        if (text.find(word) == std::string::npos) continue;
        std::ifstream status(entry.path() / "status");
        std::string line;
        while (std::getline(status, line))
            if (line.rfind("PPid:", 0) == 0 &&
                tests::to_number<long>(std::string_view(line).substr(5)) == parent)
                found.push_back(tests::to_number<pid_t>(name).value_or(-1));
    }
    return found;
}

// An agent polling a repository every 3 s at an unreachable GitHub (127.0.0.1, a port nobody
// listens on; a round gives up after about 2 s of retries): its own RSS while no round runs,
// sampled for 8 s, and the rounds seen.
void polling_agent(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "token") << "bench-token\n";
    std::filesystem::permissions(
        dir / "token", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    const pid_t pid =
        start_agent(dir, false,
                    "github:\n  repositories: [octo/gate]\n  api_url: http://127.0.0.1:9\n"
                    "  token_file: " +
                        (dir / "token").string() + "\n  poll_seconds: 3\n");
    std::this_thread::sleep_for(std::chrono::seconds(1));
    std::vector<long> idle_kib;
    std::set<pid_t> rounds;
    long round_peak_kib = 0;
    const auto until = Clock::now() + std::chrono::seconds(8);
    while (Clock::now() < until) {
        const auto workers = children_running(pid, "agent-github");
        for (pid_t worker : workers) {
            rounds.insert(worker);
            round_peak_kib = std::max(round_peak_kib, status_kib(worker, "VmHWM"));
        }
        if (workers.empty()) idle_kib.push_back(status_kib(pid, "VmRSS"));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::sort(idle_kib.begin(), idle_kib.end());
    if (idle_kib.empty()) idle_kib.push_back(0);  // never idle: printed as 0
    std::printf(
        "polling agent (1 repository, every 3 s, GitHub unreachable): idle RSS between "
        "rounds %.2f MiB median, %.2f MiB max (%zu samples); %zu round(s) seen in 8 s, "
        "a round's process peaking at %.1f MiB while it runs\n",
        idle_kib[idle_kib.size() / 2] / 1024.0, idle_kib.back() / 1024.0, idle_kib.size(),
        rounds.size(), round_peak_kib / 1024.0);
    std::fflush(stdout);
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
}

}  // namespace

// `bench_broker --steps-only`: the step figures alone (for profiling the broker).
int main(int argc, char** argv) {
    const bool steps_only = argc > 1 && std::string_view(argv[1]) == "--steps-only";
    char pattern[] = "/tmp/sandgate-bench-broker-XXXXXX";
    const std::filesystem::path dir = ::mkdtemp(pattern);
    const auto figures = steps(dir / "b");
    const double bwrap = steps_only ? -1 : fresh_bwrap();
    std::printf(
        "step `true`: fork/exec %.0f us, broker %.0f us (medians of %d interleaved "
        "rounds), fresh bwrap %.0f us\n",
        figures.plain_us, figures.broker_us, k_rounds, bwrap);
    std::printf("broker / fork-exec = %.2fx (target <= 1.5x); fresh bwrap / broker = %.2fx\n",
                figures.ratio, bwrap / figures.broker_us);
    std::printf("of a brokered step: transport (ping round trip) %.0f us; steps reaped by %s\n",
                g_ping_us, g_reaper.empty() ? "?" : g_reaper.c_str());
    std::fflush(stdout);
    std::error_code ec;
    if (steps_only) {
        std::filesystem::remove_all(dir, ec);
        return 0;
    }

    for (const bool persistent : {false, true}) {
        const auto agent_dir = dir / (persistent ? "a-sandbox" : "a-plain");
        const pid_t agent_pid = start_agent(agent_dir, persistent);
        std::this_thread::sleep_for(std::chrono::seconds(1));
        if (!persistent)
            std::printf(
                "agent idle RSS: %.2f MiB (%ld KiB; target < 10 MiB): anonymous %.2f MiB, "
                "file-backed (code and data of the binary and its libraries) %.2f MiB\n",
                status_kib(agent_pid, "VmRSS") / 1024.0, status_kib(agent_pid, "VmRSS"),
                status_kib(agent_pid, "RssAnon") / 1024.0,
                status_kib(agent_pid, "RssFile") / 1024.0);
        auto queue = agent::open_sqlite_queue(agent::default_queue_path(agent_dir / "state"));
        const auto start = Clock::now();
        for (int i = 0; i < k_jobs; ++i) {
            agent::JobSpec spec;
            auto n = std::to_string(i);
            spec.key = {"bench/repo", std::string(40 - n.size(), 'b') + n, "", 1};
            (void)(*queue)->submit(spec);
        }
        ::kill(agent_pid, SIGUSR1);
        while (*(*queue)->count(agent::JobState::succeeded) +
                   *(*queue)->count(agent::JobState::failed) <
               k_jobs)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        std::printf(
            "%d jobs end to end (job command /bin/true, 4 at once, %s): %.2f s, %.1f jobs/s, "
            "%lld failed\n",
            k_jobs, persistent ? "a persistent bwrap sandbox per job" : "no job sandbox", seconds,
            k_jobs / seconds, static_cast<long long>(*(*queue)->count(agent::JobState::failed)));
        std::fflush(stdout);
        ::kill(agent_pid, SIGTERM);
        ::waitpid(agent_pid, nullptr, 0);
    }
    polling_agent(dir / "a-polling");
    std::filesystem::remove_all(dir, ec);
    return 0;
}
