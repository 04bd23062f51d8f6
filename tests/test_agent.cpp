#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "agent/agent_config.hpp"
#include "agent/daemon.hpp"
#include "agent/job_store.hpp"
#include "tests/support/temp_dir.hpp"

using namespace std::chrono_literals;

namespace {

constexpr const char* k_sha = "0123456789abcdef0123456789abcdef01234567";

// The job command: marks its start, waits for a release file, prints, exits with the code
// the release file holds.
constexpr const char* k_job_script = R"SH(#!/bin/sh
touch "$MARKS/started-$SANDGATE_JOB_ID"
while [ ! -e "$MARKS/release" ]; do sleep 0.05; done
echo "job $SANDGATE_JOB_ID of $SANDGATE_JOB_REPOSITORY at $SANDGATE_JOB_SHA"
touch "$MARKS/finished-$SANDGATE_JOB_ID"
exit "$(cat "$MARKS/release")"
)SH";

struct Process {
    pid_t pid = -1;
    ~Process() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }
    int wait() {
        int status = 0;
        ::waitpid(pid, &status, 0);
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
};

Process spawn(std::vector<std::string> argv, const std::filesystem::path& marks) {
    Process process;
    process.pid = ::fork();
    if (process.pid == 0) {
        ::setenv("MARKS", marks.c_str(), 1);
        std::vector<char*> args;
        for (auto& arg : argv) args.push_back(arg.data());
        args.push_back(nullptr);
        ::execv(args[0], args.data());
        ::_exit(127);
    }
    return process;
}

struct Agent {
    std::filesystem::path dir = tests::make_temp_dir("agent");
    std::filesystem::path marks = dir / "marks";
    std::filesystem::path config = dir / "agent.yaml";

    explicit Agent(std::string extra = "") {
        std::filesystem::create_directories(marks);
        // The agent hands jobs a clean environment: the marks directory is written in.
        std::string script = k_job_script;
        for (auto at = script.find("$MARKS"); at != std::string::npos; at = script.find("$MARKS"))
            script.replace(at, 6, marks.string());
        tests::write_file(dir / "job.sh", script);
        std::filesystem::permissions(dir / "job.sh", std::filesystem::perms::owner_all);
        tests::write_file(config, "agent:\n  id: test-agent\n  state_dir: " + (dir / "state").string() +
                                      "\n  max_jobs: 2\n  lease_seconds: 30\n" + extra +
                                      "job:\n  command: [" + (dir / "job.sh").string() + "]\n");
    }
    Process start() { return spawn({SANDGATE_BINARY, "agent", "--config", config.string()}, marks); }
    std::filesystem::path socket() const { return dir / "state" / "agent" / "run" / "api.sock"; }
    int jobs(std::vector<std::string> args) {
        args.insert(args.begin(), {SANDGATE_BINARY, "jobs", "--socket", socket().string()});
        auto process = spawn(std::move(args), marks);
        return process.wait();
    }
    void wait_ready() {
        while (!std::filesystem::exists(socket()) || jobs({"list"}) != 0)
            std::this_thread::sleep_for(20ms);
    }
    std::unique_ptr<agent::JobQueue> queue() {
        return std::move(*agent::open_sqlite_queue(agent::default_queue_path(dir / "state")));
    }
    std::int64_t submit(const std::string& sha) {
        REQUIRE(jobs({"submit", "--repo", "octo/repo", "--sha", sha}) == 0);
        agent::JobFilter filter;
        filter.sha = sha;
        return (*queue()->list(filter)).at(0).id;
    }
    void wait_file(const std::string& name) {
        while (!std::filesystem::exists(marks / name)) std::this_thread::sleep_for(20ms);
    }
    agent::JobState wait_terminal(std::int64_t id) {
        auto q = queue();
        while (true) {
            auto job = q->get(id);
            REQUIRE((job && *job));
            const auto state = (*job)->state;
            if (agent::is_terminal(state)) return state;
            std::this_thread::sleep_for(20ms);
        }
    }
};

std::string sha(int n) {
    auto text = std::to_string(n);
    return std::string(40 - text.size(), 'a') + text;
}

}  // namespace

TEST_CASE("the agent configuration: defaults, init, and errors naming file:line") {
    auto dir = tests::make_temp_dir("config");
    Agent scratch;
    const auto written = dir / "init.yaml";
    auto init = spawn({SANDGATE_BINARY, "agent", "init", written.string()}, dir);
    REQUIRE(init.wait() == 0);
    auto loaded = agent::load_agent_config(written);
    REQUIRE(loaded);
    CHECK(loaded->max_jobs == 2);
    CHECK(loaded->on_lost_job == agent::OnLostLease::conclude);
    auto again = spawn({SANDGATE_BINARY, "agent", "init", written.string()}, dir);
    CHECK(again.wait() != 0);  // never overwrites

    tests::write_file(dir / "bad.yaml", "agent:\n  max_jobs: 2\n  colour: blue\n");
    auto bad = agent::load_agent_config(dir / "bad.yaml");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message == (dir / "bad.yaml").string() + ":3: agent.colour: unknown key");
    tests::write_file(dir / "zero.yaml", "agent:\n  max_jobs: 0\n");
    CHECK(agent::load_agent_config(dir / "zero.yaml").error().message.find(":2: agent.max_jobs") !=
          std::string::npos);
    tests::write_file(dir / "tcp.yaml", "api:\n  listen: 127.0.0.1:9999\n");
    CHECK(agent::load_agent_config(dir / "tcp.yaml").error().message.find("token_file") !=
          std::string::npos);
    tests::write_file(dir / "secret", "value\n");
    std::filesystem::permissions(dir / "secret", std::filesystem::perms::owner_read |
                                                     std::filesystem::perms::group_read);
    auto secret = agent::read_secret_file(dir / "secret");
    REQUIRE_FALSE(secret);
    CHECK(secret.error().message.find("value") == std::string::npos);
    std::filesystem::permissions(dir / "secret", std::filesystem::perms::owner_read);
    CHECK(agent::read_secret_file(dir / "secret") == "value");

    agent::AgentConfig config;
    config.state_dir = "/state";
    agent::Job job;
    job.spec.key = {"octo/repo", k_sha, "ci.yml/build", 1};
    job.spec.event = "merge_group";
    job.spec.ref = "refs/heads/gh-readonly-queue/main/pr-1";
    const auto argv = agent::job_argv(config, job, "/usr/bin/sandgate");
    CHECK(argv == std::vector<std::string>{"/usr/bin/sandgate", "gate", "--repo",
                                           "https://github.com/octo/repo", "--sha", k_sha,
                                           "--event", "merge_group", "--state-dir", "/state",
                                           "--sandbox", "bwrap", "--network", "none", "--ref",
                                           "refs/heads/gh-readonly-queue/main/pr-1", "-j",
                                           "ci.yml/build"});
}

TEST_CASE("the agent runs at most max_jobs at once, logs each, and concludes them") {
    Agent agent;
    auto daemon = agent.start();
    agent.wait_ready();
    std::vector<std::int64_t> ids;
    for (int i = 0; i < 4; ++i) ids.push_back(agent.submit(sha(i)));
    agent.wait_file("started-" + std::to_string(ids[0]));
    agent.wait_file("started-" + std::to_string(ids[1]));
    auto queue = agent.queue();
    CHECK(*queue->count(agent::JobState::running) == 2);
    CHECK(*queue->count(agent::JobState::queued) == 2);  // the limit holds
    CHECK_FALSE(std::filesystem::exists(agent.marks / ("started-" + std::to_string(ids[2]))));
    tests::write_file(agent.marks / "release", "0");
    for (auto id : ids) CHECK(agent.wait_terminal(id) == agent::JobState::succeeded);
    const auto log = tests::read_file(agent.dir / "state" / "agent" / "logs" /
                                      (std::to_string(ids[3]) + ".log"));
    CHECK(log == "job " + std::to_string(ids[3]) + " of octo/repo at " + sha(3) + "\n");
    ::kill(daemon.pid, SIGTERM);
    CHECK(daemon.wait() == 0);
}

TEST_CASE("a cancel through the CLI stops a running job; a failing job is failed") {
    Agent agent;
    auto daemon = agent.start();
    agent.wait_ready();
    const auto id = agent.submit(sha(1));
    agent.wait_file("started-" + std::to_string(id));
    REQUIRE(agent.jobs({"cancel", std::to_string(id)}) == 0);
    CHECK(agent.wait_terminal(id) == agent::JobState::cancelled);
    CHECK_FALSE(std::filesystem::exists(agent.marks / ("finished-" + std::to_string(id))));
    tests::write_file(agent.marks / "release", "1");
    const auto failing = agent.submit(sha(2));
    CHECK(agent.wait_terminal(failing) == agent::JobState::failed);
    CHECK(agent.jobs({"get", "999"}) != 0);
    ::kill(daemon.pid, SIGTERM);
    CHECK(daemon.wait() == 0);
}

TEST_CASE("kill -9 mid-job: the restarted agent concludes the job, or re-runs it") {
    for (const char* policy : {"conclude", "requeue"}) {
        Agent agent(std::string("  on_lost_job: ") + policy + "\n");
        auto first = agent.start();
        agent.wait_ready();
        const auto id = agent.submit(sha(7));
        agent.wait_file("started-" + std::to_string(id));
        ::kill(first.pid, SIGKILL);
        first.wait();
        tests::write_file(agent.marks / "release", "0");
        auto second = agent.start();
        const auto state = agent.wait_terminal(id);
        if (std::string(policy) == "conclude") {
            CHECK(state == agent::JobState::failed);
            CHECK((*agent.queue()->get(id))->reason.find("test-agent") != std::string::npos);
        } else {
            CHECK(state == agent::JobState::succeeded);
            CHECK((*agent.queue()->get(id))->claims == 2);
        }
        ::kill(second.pid, SIGTERM);
        CHECK(second.wait() == 0);
    }
}

TEST_CASE("SIGTERM drains: running jobs finish, or are cancelled at the deadline") {
    {
        Agent agent;
        auto daemon = agent.start();
        agent.wait_ready();
        const auto id = agent.submit(sha(1));
        agent.wait_file("started-" + std::to_string(id));
        ::kill(daemon.pid, SIGTERM);
        const auto queued = agent.submit(sha(2));  // the API still answers while draining
        tests::write_file(agent.marks / "release", "0");
        CHECK(daemon.wait() == 0);
        auto queue = agent.queue();
        CHECK((*queue->get(id))->state == agent::JobState::succeeded);
        CHECK((*queue->get(queued))->state == agent::JobState::queued);  // not claimed
    }
    {
        Agent agent("  drain_seconds: 1\n");
        auto daemon = agent.start();
        agent.wait_ready();
        const auto id = agent.submit(sha(3));
        agent.wait_file("started-" + std::to_string(id));
        ::kill(daemon.pid, SIGTERM);
        CHECK(daemon.wait() == 0);
        CHECK((*agent.queue()->get(id))->state == agent::JobState::cancelled);
    }
}
