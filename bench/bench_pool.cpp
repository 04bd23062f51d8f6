// bench_pool: 500 trivial jobs (job.command: one `sh -c` that logs the job's id) through a pool
// of 1, 2 and 4 `sandgate agent` daemons on one PostgreSQL 15 (started here, as the suite
// starts it: tests/support/postgres.hpp), against one agent on the embedded SQLite queue,
// measured in the same run: jobs per second from the first submit to the last job's end; the
// queue wait of those jobs (a job's `started` minus its `created`, both the queue's clock:
// mostly the backlog); the claim latency of an idle pool (20 jobs submitted one at a time,
// the same difference); as medians and 95th percentiles; and the duplicate runs (a job id
// logged twice), which must be zero.
// The jobs are submitted straight into the queue, so the agents learn of them from the queue
// itself (NOTIFY on PostgreSQL, the loop's tick on SQLite).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/store/job_store.hpp"
#include "tests/support/postgres.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int k_jobs = 500;
constexpr int k_max_jobs = 4;  // per agent
constexpr int k_idle_claims = 20;

struct Figures {
    double jobs_per_second = 0;
    double wait_p50_ms = 0;  // in the queue behind the backlog of 500
    double wait_p95_ms = 0;
    double claim_p50_ms = 0;  // an idle pool: one job submitted, its claim
    double claim_p95_ms = 0;
    std::size_t duplicates = 0;
    std::size_t failed = 0;
};

std::string read(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

pid_t start_agent(const std::filesystem::path& dir, const std::string& id, const std::string& queue,
                  const std::filesystem::path& runs) {
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "agent.yaml")
        << "agent:\n  id: " << id << "\n  state_dir: " << (dir / "state").string()
        << "\n  max_jobs: " << k_max_jobs << "\n"
        << queue << "job:\n  command: [/bin/sh, -c, 'echo $SANDGATE_JOB_ID >> " << runs.string()
        << "']\n  persistent_sandbox: false\n";
    const pid_t pid = ::fork();
    if (pid == 0) {
        const std::string config = (dir / "agent.yaml").string();
        const int log =
            ::open((dir / "agent.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (log >= 0) {
            ::dup2(log, 1);
            ::dup2(log, 2);
        }
        ::execl(SANDGATE_BINARY, SANDGATE_BINARY, "agent", "--config", config.c_str(),
                static_cast<char*>(nullptr));
        ::_exit(127);
    }
    while (!std::filesystem::exists(dir / "state" / "agent" / "run" / "api.sock"))
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return pid;
}

double percentile(std::vector<double> values, double p) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    return values[static_cast<std::size_t>(p * static_cast<double>(values.size() - 1))];
}

agent::JobSpec job_spec(int i) {
    agent::JobSpec spec;
    const auto n = std::to_string(i);
    spec.key = {"bench/pool", std::string(40 - n.size(), 'p') + n, "", 1};
    spec.event = "push";
    spec.source = "api";
    return spec;
}

// The claim latency of an idle pool: jobs submitted one at a time, each once the one before
// ended; started minus created (ms), per job.
std::vector<double> idle_claims(agent::JobQueue& queue, int first, int count) {
    std::vector<double> out;
    for (int i = first; i < first + count; ++i) {
        auto submitted = queue.submit(job_spec(i));
        if (!submitted) break;
        while (true) {
            auto job = queue.get(submitted->job.id);
            if (!job || !*job) return out;
            if (agent::is_terminal((*job)->state)) {
                out.push_back(static_cast<double>((*job)->started_ms - (*job)->created_ms));
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
    }
    return out;
}

// Runs the 500 jobs through agents already started on `queue`, then the idle claims; `pids`
// are stopped after.
Figures measure(agent::JobQueue& queue, const std::vector<pid_t>& pids,
                const std::filesystem::path& runs) {
    // Let every agent reach its idle loop first.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const auto start = Clock::now();
    for (int i = 0; i < k_jobs; ++i) (void)queue.submit(job_spec(i));
    while (*queue.count(agent::JobState::succeeded) + *queue.count(agent::JobState::failed) <
           k_jobs)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    Figures figures;
    figures.jobs_per_second = k_jobs / std::chrono::duration<double>(Clock::now() - start).count();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // idle again
    const auto claims = idle_claims(queue, k_jobs, k_idle_claims);
    figures.claim_p50_ms = percentile(claims, 0.5);
    figures.claim_p95_ms = percentile(claims, 0.95);
    for (pid_t pid : pids) {
        ::kill(pid, SIGTERM);
        ::waitpid(pid, nullptr, 0);
    }
    agent::JobFilter all;
    all.limit = k_jobs * 2;
    std::vector<double> waits;
    const auto jobs = queue.list(all);
    if (!jobs) return figures;
    for (const auto& job : *jobs) {
        if (job.id <= k_jobs) waits.push_back(static_cast<double>(job.started_ms - job.created_ms));
        figures.failed += job.state != agent::JobState::succeeded;
    }
    figures.wait_p50_ms = percentile(waits, 0.5);
    figures.wait_p95_ms = percentile(waits, 0.95);
    std::map<std::string, int> seen;
    std::istringstream lines(read(runs));
    for (std::string id; std::getline(lines, id);)
        if (++seen[id] == 2) ++figures.duplicates;
    return figures;
}

void print(const char* what, const Figures& figures, const Figures* baseline) {
    std::printf("%-28s %7.1f jobs/s", what, figures.jobs_per_second);
    if (baseline)
        std::printf(" (%.2fx SQLite)", figures.jobs_per_second / baseline->jobs_per_second);
    std::printf(
        ", queue wait p50 %6.0f ms p95 %6.0f ms; idle claim latency p50 %5.1f ms p95 %5.1f ms; "
        "%zu duplicate run(s), %zu failed\n",
        figures.wait_p50_ms, figures.wait_p95_ms, figures.claim_p50_ms, figures.claim_p95_ms,
        figures.duplicates, figures.failed);
    std::fflush(stdout);
}

}  // namespace

int main() {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("sandgate-bench-pool-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::printf(
        "bench_pool: %d jobs (job.command: sh -c 'echo ID >> runs'), %d at once per agent, "
        "on %u cores\n",
        k_jobs, k_max_jobs, std::thread::hardware_concurrency());

    Figures sqlite;
    {
        const auto runs = dir / "sqlite-runs";
        std::ofstream(runs).flush();
        const pid_t pid = start_agent(dir / "sqlite", "bench-sqlite", "", runs);
        auto queue = agent::open_sqlite_queue(agent::default_queue_path(dir / "sqlite" / "state"));
        if (!queue) return 1;
        sqlite = measure(**queue, {pid}, runs);
        print("sqlite, 1 agent:", sqlite, nullptr);
    }

    std::unique_ptr<tests::PostgresServer> server;
    try {
        server = std::make_unique<tests::PostgresServer>();
    } catch (const std::exception& error) {
        std::fprintf(stderr, "bench_pool: PostgreSQL: %s\n", error.what());
        return 1;
    }
    std::size_t duplicates = sqlite.duplicates;
    for (const int agents : {1, 2, 4}) {
        const auto database = server->fresh_database();
        const auto url = server->url(database);
        const auto runs = dir / ("pg-runs-" + std::to_string(agents));
        std::ofstream(runs).flush();
        agent::PostgresOptions options;
        options.url = url;
        auto queue = agent::open_postgres_queue(options);
        if (!queue) {
            std::fprintf(stderr, "bench_pool: %s\n", queue.error().message.c_str());
            return 1;
        }
        std::vector<pid_t> pids;
        for (int i = 0; i < agents; ++i)
            pids.push_back(
                start_agent(dir / ("pg-" + std::to_string(agents) + "-" + std::to_string(i)),
                            "bench-" + std::to_string(i), "queue:\n  url: " + url + "\n", runs));
        const auto figures = measure(**queue, pids, runs);
        duplicates += figures.duplicates;
        const std::string what = "postgresql, " + std::to_string(agents) + " agent(s):";
        print(what.c_str(), figures, &sqlite);
    }
    std::printf("duplicate runs in all: %zu (must be 0)\n", duplicates);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return duplicates == 0 ? 0 : 1;
}
