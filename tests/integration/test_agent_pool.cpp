// A pool: several `sandgate agent` daemons on one PostgreSQL queue (a real PostgreSQL 15 this
// binary starts, tests/support/postgres.hpp) against the GitHub stand-in (tests/fake_github):
// no job runs twice, no report goes out twice, every run is concluded; the pool polls each
// repository once per interval; kill -9 of the agent holding a job hands the job to another
// after the lease; the database stopped and restarted mid-job loses nothing; a draining agent
// sends what it owes; an idle agent is woken by NOTIFY; the password never in the
// configuration.
#include <signal.h>
#include <simdjson.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/store/job_store.hpp"
#include "tests/fake_github/fake_github.hpp"
#include "tests/helpers/git_fixture.hpp"
#include "tests/support/agent_fixture.hpp"
#include "tests/support/api_fixture.hpp"
#include "tests/support/postgres.hpp"
#include "tests/support/scoped_env.hpp"

using namespace tests::agent_fixture;

namespace {

// The job of every agent of a pool: logs "start JOB AGENT" to the pool's shared `runs` file,
// waits for SHARED/release-JOB or SHARED/release-all, logs "end JOB AGENT", exits 0.
std::string job_script(const std::filesystem::path& shared, const std::string& agent) {
    return "#!/bin/sh\nS='" + shared.string() + "'\necho \"start $SANDGATE_JOB_ID " + agent +
           "\" >> \"$S/runs\"\nwhile [ ! -e \"$S/release-$SANDGATE_JOB_ID\" ] && [ ! -e "
           "\"$S/release-all\" ]; "
           "do sleep 0.05; done\nsleep 0.2\necho \"end $SANDGATE_JOB_ID " +
           agent + "\" >> \"$S/runs\"\n";
}

struct PoolAgent {
    std::string id;
    std::filesystem::path dir;
    Process daemon;
    std::filesystem::path socket() const { return dir / "state" / "agent" / "run" / "api.sock"; }
    std::filesystem::path log() const { return dir / "agent.log"; }
    bool alive() { return daemon.pid > 0 && ::waitpid(daemon.pid, nullptr, WNOHANG) == 0; }
};

struct Pool {
    tests::PostgresServer& pg;
    tests::FakeGitHub& github;
    std::string database = pg.fresh_database();
    std::filesystem::path shared = tests::make_temp_dir("pool");
    std::vector<std::unique_ptr<PoolAgent>> agents;

    Pool(tests::PostgresServer& server, tests::FakeGitHub& fake) : pg(server), github(fake) {
        tests::write_file(shared / "github-token", std::string(tests::k_fake_token) + "\n");
        std::filesystem::permissions(
            shared / "github-token",
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
        tests::write_file(shared / "runs", "");
    }

    std::string url() const { return pg.url(database); }

    // The agent's configuration: `agent_extra` goes into agent:, `github_extra` into github:.
    // `job`: the job: section; empty: the pool's job script.
    std::string config(const std::string& id, const std::filesystem::path& dir,
                       const std::string& agent_extra, const std::string& github_extra,
                       const std::string& queue, const std::string& job = "") const {
        return "agent:\n  id: " + id + "\n  state_dir: " + (dir / "state").string() +
               "\n  reap_seconds: 1\n" + agent_extra + "queue:\n" + queue +
               "github:\n  repositories: [octo/gate]\n  api_url: " + github.url() +
               "\n  token_file: " + (shared / "github-token").string() + "\n" + github_extra +
               (job.empty() ? "job:\n  command: [" + (dir / "job.sh").string() + "]\n  sandbox: " +
                                  job_sandbox() + "\n  persistent_sandbox: false\n"
                            : job);
    }

    PoolAgent& start(const std::string& agent_extra = "", const std::string& github_extra = "",
                     const std::string& job = "") {
        auto agent = std::make_unique<PoolAgent>();
        agent->id = "pool-" + std::to_string(agents.size() + 1);
        agent->dir = tests::make_temp_dir(agent->id);
        tests::write_file(agent->dir / "job.sh", job_script(shared, agent->id));
        std::filesystem::permissions(agent->dir / "job.sh", std::filesystem::perms::owner_all);
        tests::write_file(agent->dir / "agent.yaml",
                          config(agent->id, agent->dir, agent_extra, github_extra,
                                 "  url: " + url() + "\n", job));
        agent->daemon =
            spawn({SANDGATE_BINARY, "agent", "--config", (agent->dir / "agent.yaml").string()},
                  agent->dir, agent->log());
        while (!std::filesystem::exists(agent->socket())) {
            REQUIRE(agent->alive());
            std::this_thread::sleep_for(20ms);
        }
        agents.push_back(std::move(agent));
        return *agents.back();
    }

    std::unique_ptr<agent::JobQueue> queue() const {
        agent::PostgresOptions options;
        options.url = url();
        auto opened = agent::open_postgres_queue(options);
        REQUIRE(opened.has_value());
        return std::move(*opened);
    }

    int submit(const PoolAgent& via, const std::string& sha,
               const std::string& event = "push") const {
        auto process = spawn({SANDGATE_BINARY, "jobs", "--socket", via.socket().string(), "submit",
                              "--repo", "octo/gate", "--sha", sha, "--event", event},
                             shared, shared / "submit.out");
        return process.wait();
    }

    // The runs file: job id -> the agents that started it, in order.
    std::map<std::int64_t, std::vector<std::string>> starts() const {
        std::map<std::int64_t, std::vector<std::string>> out;
        std::istringstream in(tests::read_file(shared / "runs"));
        std::string word, agent;
        std::int64_t id = 0;
        while (in >> word >> id >> agent)
            if (word == "start") out[id].push_back(agent);
        return out;
    }

    void stop_all() {
        for (auto& agent : agents) {
            if (agent->daemon.pid <= 0) continue;
            ::kill(agent->daemon.pid, SIGTERM);
            CHECK(agent->daemon.wait() == 0);
        }
    }
};

struct Request {
    std::string method, target, body;
};

std::vector<Request> requests(const tests::FakeGitHub& server) {
    simdjson::dom::parser parser;
    const std::string text = server.requests();
    simdjson::dom::element root;
    REQUIRE(parser.parse(text).get(root) == simdjson::SUCCESS);
    std::vector<Request> out;
    for (auto item : root["requests"].get_array())
        out.push_back({std::string(std::string_view(item["method"])),
                       std::string(std::string_view(item["target"])),
                       std::string(std::string_view(item["body"]))});
    return out;
}

struct Run {
    std::string head_sha, status, conclusion;
};

std::vector<Run> runs(const tests::FakeGitHub& server) {
    simdjson::dom::parser parser;
    const std::string text = server.state();
    simdjson::dom::element root;
    REQUIRE(parser.parse(text).get(root) == simdjson::SUCCESS);
    std::vector<Run> out;
    for (auto run : root["check_runs"].get_array()) {
        Run seen{std::string(std::string_view(run["head_sha"])),
                 std::string(std::string_view(run["status"])), ""};
        std::string_view conclusion;
        if (run["conclusion"].get(conclusion) == simdjson::SUCCESS) seen.conclusion = conclusion;
        out.push_back(seen);
    }
    return out;
}

// Waits until the stand-in holds `count` runs, all completed (a bug hangs here until ctest's
// bound rather than passing).
std::vector<Run> wait_concluded(const tests::FakeGitHub& server, std::size_t count) {
    while (true) {
        auto seen = runs(server);
        std::size_t done = 0;
        for (const auto& run : seen) done += run.status == "completed";
        if (seen.size() == count && done == count) return seen;
        std::this_thread::sleep_for(100ms);
    }
}

std::string hex_sha(int n) {
    char text[41];
    std::snprintf(text, sizeof text, "%040x", n);
    return text;
}

// Counts each report GitHub received: POSTs creating a run, and bodies carrying a conclusion.
std::pair<std::size_t, std::size_t> created_and_concluded(const tests::FakeGitHub& server) {
    std::size_t created = 0, concluded = 0;
    for (const auto& request : requests(server)) {
        if (request.target.find("/check-runs") == std::string::npos) continue;
        if (request.method == "POST") ++created;
        if (request.body.find("\"conclusion\":") != std::string::npos) ++concluded;
    }
    return {created, concluded};
}

}  // namespace

TEST_CASE(
    "a pool of two and of three agents on one queue: every polled job runs once, each "
    "run is reported once and concluded; the pool polls the repository once per interval") {
    REQUIRE_POSTGRES(pg);
    const int agents = GENERATE(2, 3);
    INFO(agents << " agents");
    tests::FakeGitHub server;
    Pool pool(*pg, server);
    constexpr int k_pulls = 12;
    std::string pulls;
    for (int n = 1; n <= k_pulls; ++n)
        pulls += std::string(pulls.empty() ? "" : ",") + R"({"number":)" + std::to_string(n) +
                 R"(,"sha":")" + hex_sha(n) + R"("})";
    server.post("/_control/repo", R"({"repo":"octo/gate","pulls":[)" + pulls + "]}");
    tests::write_file(pool.shared / "release-all", "");
    const auto began = std::chrono::steady_clock::now();
    for (int i = 0; i < agents; ++i) pool.start("", "  poll_seconds: 1\n");
    const auto concluded = wait_concluded(server, k_pulls);
    for (const auto& run : concluded) CHECK(run.conclusion == "success");
    // Both agents answer for the pool: the same key through either queues one job.
    CHECK(pool.submit(*pool.agents[0], hex_sha(900)) == 0);
    CHECK(pool.submit(*pool.agents[1], hex_sha(900)) == 0);
    CHECK(tests::read_file(pool.shared / "submit.out").find(R"("duplicate":true)") !=
          std::string::npos);
    wait_concluded(server, k_pulls + 1);
    std::this_thread::sleep_for(2s);  // more poll rounds: still nothing twice
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    pool.stop_all();

    auto queue = pool.queue();
    agent::JobFilter all;
    all.limit = 1000;
    const auto jobs = *queue->list(all);
    CHECK(jobs.size() == k_pulls + 1);
    std::set<std::string> ran_on;
    const auto starts = pool.starts();
    CHECK(starts.size() == k_pulls + 1);
    for (const auto& job : jobs) {
        INFO("job " << job.id);
        CHECK(job.state == agent::JobState::succeeded);
        CHECK(job.claims == 1);
        REQUIRE(starts.count(job.id) == 1);
        CHECK(starts.at(job.id).size() == 1);  // ran once
        ran_on.insert(starts.at(job.id).front());
    }
    CHECK(ran_on.size() >= 2);  // the pool shared the work
    const auto [created, reported] = created_and_concluded(server);
    CHECK(created == k_pulls + 1);   // one check run per job
    CHECK(reported == k_pulls + 1);  // one conclusion per run
    CHECK(*queue->owed_reports(std::nullopt) == 0);
    // Each of the `agents` daemons started a poll round every second; the pool polled once per
    // interval (the schedule's slack allows a few early ones).
    std::size_t polls = 0;
    for (const auto& request : requests(server))
        polls += request.target.find("/pulls?") != std::string::npos;
    INFO(polls << " polls in " << seconds << " s");
    CHECK(polls <= static_cast<std::size_t>(seconds * 1.25) + 2);
}

TEST_CASE("a pool: kill -9 of the agent holding a job; another agent takes it after the lease") {
    REQUIRE_POSTGRES(pg);
    tests::FakeGitHub server;
    Pool pool(*pg, server);
    const std::string lease = "  lease_seconds: 2\n  on_lost_job: requeue\n  max_attempts: 2\n";
    pool.start(lease);
    pool.start(lease);
    REQUIRE(pool.submit(*pool.agents[0], hex_sha(77)) == 0);
    while (pool.starts().empty()) std::this_thread::sleep_for(20ms);
    const auto first = pool.starts().begin()->second.front();
    auto& holder = *pool.agents[first == "pool-1" ? 0 : 1];
    auto& other = *pool.agents[first == "pool-1" ? 1 : 0];
    // Its run in progress, the start report marked sent (a round killed between the two would
    // hold the job's later reports until that report's lease ends).
    auto queue = pool.queue();
    while (runs(server).empty() || *queue->owed_reports(holder.id) > 0)
        std::this_thread::sleep_for(50ms);
    ::kill(holder.daemon.pid, SIGKILL);
    holder.daemon.wait();
    // The job's process died with its agent; once the lease expires the other agent re-queues
    // the job and runs it.
    while (pool.starts().begin()->second.size() < 2) std::this_thread::sleep_for(50ms);
    CHECK(pool.starts().begin()->second == std::vector<std::string>{holder.id, other.id});
    tests::write_file(pool.shared / "release-all", "");
    const auto concluded = wait_concluded(server, 1);
    CHECK(concluded[0].conclusion == "success");
    const auto job = *queue->get(1);
    CHECK(job->state == agent::JobState::succeeded);
    CHECK(job->claims == 2);
    CHECK(created_and_concluded(server).second == 1);
    CHECK(tests::read_file(other.log()).find("its lease expired; re-queued") != std::string::npos);
    pool.stop_all();
}

TEST_CASE(
    "a pool: kill -9 of the agent holding a job under on_lost_job: conclude; another agent "
    "concludes it and sends the report the dead agent owed") {
    REQUIRE_POSTGRES(pg);
    tests::FakeGitHub server;
    Pool pool(*pg, server);
    const std::string lease = "  lease_seconds: 2\n  on_lost_job: conclude\n";
    pool.start(lease);
    pool.start(lease);
    REQUIRE(pool.submit(*pool.agents[0], hex_sha(78)) == 0);
    while (pool.starts().empty()) std::this_thread::sleep_for(20ms);
    auto& holder = *pool.agents[pool.starts().at(1).front() == "pool-1" ? 0 : 1];
    auto& other = *pool.agents[pool.starts().at(1).front() == "pool-1" ? 1 : 0];
    auto queue = pool.queue();
    while (runs(server).empty() || *queue->owed_reports(holder.id) > 0)
        std::this_thread::sleep_for(50ms);
    ::kill(holder.daemon.pid, SIGKILL);
    holder.daemon.wait();
    // The conclusion is the dead agent's report (its job's); the living agent's rounds send
    // it (they look at other agents' reports every k_foreign_reports).
    const auto concluded = wait_concluded(server, 1);
    CHECK(concluded[0].conclusion == "failure");
    const auto job = *queue->get(1);
    CHECK(job->state == agent::JobState::failed);
    CHECK(job->claims == 1);
    CHECK(job->reason.find("the agent " + holder.id + " died or lost its lease") !=
          std::string::npos);
    CHECK(pool.starts().at(1).size() == 1);  // not run again
    // Sent, then marked delivered (a moment later): nothing stays owed.
    while (*queue->owed_reports(std::nullopt) > 0) std::this_thread::sleep_for(50ms);
    CHECK(created_and_concluded(server) == std::pair<std::size_t, std::size_t>{1, 1});
    CHECK(tests::read_file(other.log()).find("job 1: its lease expired; concluded") !=
          std::string::npos);
    pool.stop_all();
}

TEST_CASE(
    "a pool: the database stopped and restarted mid-job; the job finishes, its end and "
    "report are not lost") {
    REQUIRE_POSTGRES(pg);
    tests::FakeGitHub server;
    Pool pool(*pg, server);
    pool.start();
    pool.start();
    REQUIRE(pool.submit(*pool.agents[0], hex_sha(88)) == 0);
    while (pool.starts().empty()) std::this_thread::sleep_for(20ms);
    while (runs(server).empty()) std::this_thread::sleep_for(50ms);
    pg->stop();
    tests::write_file(pool.shared / "release-all", "");  // the job ends while the database is down
    while (tests::read_file(pool.shared / "runs").find("end 1 ") == std::string::npos)
        std::this_thread::sleep_for(50ms);
    std::this_thread::sleep_for(1500ms);
    for (auto& agent : pool.agents) CHECK(agent->alive());  // nobody gave up
    pg->start();
    const auto concluded = wait_concluded(server, 1);
    CHECK(concluded[0].conclusion == "success");
    auto queue = pool.queue();
    CHECK((*queue->get(1))->state == agent::JobState::succeeded);
    CHECK((*queue->get(1))->claims == 1);
    CHECK(pool.starts().at(1).size() == 1);
    const auto holder = pool.starts().at(1).front();
    const auto log = tests::read_file(pool.agents[holder == "pool-1" ? 0 : 1]->log());
    INFO(log);
    CHECK(log.find("job ends are kept and retried") != std::string::npos);
    CHECK(log.find("job 1: its end (succeeded) is recorded") != std::string::npos);
    pool.stop_all();
}

TEST_CASE(
    "a pool: an agent drained with a report owed sends it before it exits; the others go on") {
    REQUIRE_POSTGRES(pg);
    tests::FakeGitHub server;
    Pool pool(*pg, server);
    pool.start();
    pool.start();
    REQUIRE(pool.submit(*pool.agents[0], hex_sha(99)) == 0);
    while (pool.starts().empty()) std::this_thread::sleep_for(20ms);
    while (runs(server).empty()) std::this_thread::sleep_for(50ms);
    auto& holder = *pool.agents[pool.starts().at(1).front() == "pool-1" ? 0 : 1];
    auto& other = *pool.agents[pool.starts().at(1).front() == "pool-1" ? 1 : 0];
    ::kill(holder.daemon.pid, SIGTERM);
    tests::write_file(pool.shared / "release-1", "");
    CHECK(holder.daemon.wait() == 0);
    const auto seen = runs(server);
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].status == "completed");  // sent before the agent was gone
    tests::write_file(pool.shared / "release-all", "");
    REQUIRE(pool.submit(other, hex_sha(98)) == 0);
    wait_concluded(server, 2);
    CHECK(pool.starts().at(2) == std::vector<std::string>{other.id});
    pool.stop_all();
}

TEST_CASE("a pool: an idle agent is woken by the queue's notification, not by polling it") {
    REQUIRE_POSTGRES(pg);
    tests::FakeGitHub server;
    Pool pool(*pg, server);
    auto& idle = pool.start();
    std::this_thread::sleep_for(1s);  // listening, nothing to do
    tests::write_file(pool.shared / "release-all", "");
    auto queue = pool.queue();  // another agent's connection: only NOTIFY reaches the idle one
    agent::JobSpec spec;
    spec.key = {"octo/gate", hex_sha(55), "", 1};
    const auto submitted = std::chrono::steady_clock::now();
    REQUIRE(queue->submit(spec));
    while (pool.starts().empty()) std::this_thread::sleep_for(20ms);
    // The idle loop's own look at the queue comes every 15 s; a notification at once.
    CHECK(std::chrono::steady_clock::now() - submitted < 10s);
    const auto log = tests::read_file(idle.log());
    CHECK(log.find("job queue postgresql sandgate@") != std::string::npos);
    pool.stop_all();
}

TEST_CASE("a pool's metrics: the agent's own, and the pool's queue depth") {
    REQUIRE_POSTGRES(pg);
    tests::FakeGitHub server;
    Pool pool(*pg, server);
    auto& first = pool.start("  max_jobs: 1\n");
    auto queue = pool.queue();
    for (int n = 0; n < 3; ++n) {
        agent::JobSpec spec;
        spec.key = {"octo/gate", hex_sha(300 + n), "", 1};
        REQUIRE(queue->submit(spec));
    }
    while (pool.starts().empty()) std::this_thread::sleep_for(20ms);
    const auto text = tests::api::http("GET", "http://agent/metrics", "", {}, first.socket()).body;
    INFO(text);
    CHECK(text.find("sandgate_jobs{state=\"queued\"} 2\n") != std::string::npos);
    CHECK(text.find("sandgate_jobs{state=\"running\"} 1\n") != std::string::npos);
    CHECK(text.find("sandgate_agent_jobs_running{agent=\"pool-1\"} 1\n") != std::string::npos);
    CHECK(text.find("sandgate_agent_claims_total{agent=\"pool-1\"} 1\n") != std::string::npos);
    CHECK(text.find("sandgate_agent_queue_up{agent=\"pool-1\"} 1\n") != std::string::npos);
    CHECK(text.find("sandgate_queue_info{backend=\"postgresql\"} 1\n") != std::string::npos);
    tests::write_file(pool.shared / "release-all", "");
    wait_concluded(server, 3);
    pool.stop_all();
}

TEST_CASE("a pool's password: from queue.password_file or PGPASSFILE, never in queue.url") {
    REQUIRE_POSTGRES(pg);
    tests::FakeGitHub server;
    Pool pool(*pg, server);
    const auto dir = tests::make_temp_dir("pool-password");
    tests::write_file(dir / "job.sh", job_script(pool.shared, "pw"));
    auto run_agent = [&](const std::string& queue, const std::string& name) {
        tests::write_file(dir / (name + ".yaml"),
                          pool.config("pw-" + name, dir / name, "", "", queue));
        return spawn({SANDGATE_BINARY, "agent", "--config", (dir / (name + ".yaml")).string()}, dir,
                     dir / (name + ".log"), dir / (name + ".err"));
    };
    const std::string as_pw_user = pg->url(pool.database, "pw_user");

    // In the URL: refused at once, one line naming the key, the password nowhere.
    const std::string with_password = "postgresql://pw_user:" + std::string(tests::k_pg_password) +
                                      "@/" + pool.database + "?host=" + pg->dir().string();
    auto refused = run_agent("  url: " + with_password + "\n", "in-url");
    CHECK(refused.wait() == 3);
    const auto err = tests::read_file(dir / "in-url.err");
    CHECK(err.find("in-url.yaml:6: queue.url: holds a password; put it in queue.password_file") !=
          std::string::npos);
    CHECK(err.find(tests::k_pg_password) == std::string::npos);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);

    // A wrong password: the server refuses; the agent says so and exits (no retrying forever).
    tests::write_file(dir / "wrong", "not-the-password\n");
    std::filesystem::permissions(
        dir / "wrong", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    auto wrong = run_agent(
        "  url: " + as_pw_user + "\n  password_file: " + (dir / "wrong").string() + "\n", "wrong");
    CHECK(wrong.wait() == 1);
    CHECK(tests::read_file(dir / "wrong.log").find("password authentication failed") !=
          std::string::npos);

    // The password file (0600): the agent connects.
    tests::write_file(dir / "password", std::string(tests::k_pg_password) + "\n");
    std::filesystem::permissions(
        dir / "password", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    auto with_file = run_agent(
        "  url: " + as_pw_user + "\n  password_file: " + (dir / "password").string() + "\n",
        "file");
    while (tests::read_file(dir / "file.log").find(" ready: ") == std::string::npos) {
        REQUIRE(::waitpid(with_file.pid, nullptr, WNOHANG) == 0);
        std::this_thread::sleep_for(20ms);
    }
    CHECK(tests::read_file(dir / "file.log").find("job queue postgresql pw_user@") !=
          std::string::npos);
    ::kill(with_file.pid, SIGTERM);
    CHECK(with_file.wait() == 0);

    // libpq's PGPASSFILE, with no password in the configuration at all.
    tests::write_file(dir / "pgpass-file",
                      "*:*:*:pw_user:" + std::string(tests::k_pg_password) + "\n");
    std::filesystem::permissions(dir / "pgpass-file", std::filesystem::perms::owner_read |
                                                          std::filesystem::perms::owner_write);
    tests::ScopedEnv pgpass("PGPASSFILE", (dir / "pgpass-file").string());
    auto with_pgpass = run_agent("  url: " + as_pw_user + "\n", "pgpass");
    while (tests::read_file(dir / "pgpass.log").find(" ready: ") == std::string::npos) {
        REQUIRE(::waitpid(with_pgpass.pid, nullptr, WNOHANG) == 0);
        std::this_thread::sleep_for(20ms);
    }
    ::kill(with_pgpass.pid, SIGTERM);
    CHECK(with_pgpass.wait() == 0);
}

TEST_CASE("libpq is loaded by a pool's agent only: an agent on SQLite never maps it") {
    REQUIRE_POSTGRES(pg);
    tests::FakeGitHub server;
    Pool pool(*pg, server);
    auto& member = pool.start();
    const auto maps = tests::read_file("/proc/" + std::to_string(member.daemon.pid) + "/maps");
    CHECK(maps.find("libpq.so.5") != std::string::npos);
    Agent alone;
    auto daemon = alone.start();
    alone.wait_ready();
    CHECK(tests::read_file("/proc/" + std::to_string(daemon.pid) + "/maps").find("libpq.so") ==
          std::string::npos);
    ::kill(daemon.pid, SIGTERM);
    CHECK(daemon.wait() == 0);
    pool.stop_all();
}

TEST_CASE(
    "a pool running the real gate in job sandboxes: the policy and each step's evidence "
    "land in the pool's queue") {
    REQUIRE_POSTGRES(pg);
    tests::FakeGitHub server;
    Pool pool(*pg, server);
    const auto root = tests::make_temp_dir("pool-gate");
    const std::string sha =
        tests::make_repo(root / "gate", {{".github/workflows/gate.yml",
                                          "name: gate\non: merge_group\njobs:\n  check:\n"
                                          "    runs-on: ubuntu-latest\n    steps:\n"
                                          "      - run: echo checked\n      - run: echo twice\n"}});
    std::filesystem::create_directories(root / "remotes" / "octo");
    tests::sh("git clone -q --bare " + (root / "gate").string() + " " +
              (root / "remotes/octo/gate.git").string());
    auto& member =
        pool.start("", "  clone_url: file://" + (root / "remotes").string() + "/{repository}.git\n",
                   "job:\n  sandbox: " + job_sandbox() + "\n");
    REQUIRE(pool.submit(member, sha, "merge_group") == 0);
    const auto concluded = wait_concluded(server, 1);
    CHECK(concluded[0].conclusion == "success");
    auto queue = pool.queue();
    const auto job = *queue->get(1);
    CHECK(job->state == agent::JobState::succeeded);
    CHECK(job->policy_json.find(R"("mode":")" + job_sandbox() + "\"") != std::string::npos);
    std::size_t steps = 0;
    const auto events = queue->events(1);
    REQUIRE(events);
    for (const auto& event : *events)
        if (event.kind == "step") {
            ++steps;
            CHECK(event.body_json.find(R"("exit":0)") != std::string::npos);
        }
    CHECK(steps == 2);
    // Nothing went to a SQLite file of the agent's instead.
    CHECK_FALSE(std::filesystem::exists(agent::default_queue_path(member.dir / "state")));
    pool.stop_all();
}
