#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <simdjson.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <thread>

#include "agent/agent_config.hpp"
#include "agent/daemon.hpp"
#include "agent/job_store.hpp"
#include "tests/fake_github/fake_github.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

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

// The jobs' posture (and, with persistent_sandbox, their broker's). Under the dogfood wrap a nested
// bwrap cannot mount /proc, so there the broker runs unwrapped inside the outer wrap.
std::string job_sandbox() { return tests::under_wrap() ? "off" : "bwrap"; }

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
                                      "job:\n  command: [" + (dir / "job.sh").string() +
                                      "]\n  sandbox: " + job_sandbox() + "\n");
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
                                           "--sandbox", "bwrap", "--network", "none",
                                           "--report", "/state/agent/reports/0.json", "--ref",
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

// ---- against the GitHub stand-in ------------------------------------------------------------

namespace {

void git(const std::filesystem::path& dir, const std::string& args) {
    const std::string command = "git -C '" + dir.string() +
                                "' -c user.name=sandgate -c user.email=gate@example.com "
                                "-c init.defaultBranch=main " + args + " >/dev/null 2>&1";
    REQUIRE(std::system(command.c_str()) == 0);
}

std::string head_sha(const std::filesystem::path& dir) {
    auto out = dir / ".head";
    REQUIRE(std::system(("git -C '" + dir.string() + "' rev-parse HEAD > '" + out.string() + "'").c_str()) == 0);
    auto text = tests::read_file(out);
    std::filesystem::remove(out);
    return text.substr(0, 40);
}

// A bare remote at REMOTES/octo/gate.git with two branches: `good` (the gate passes) and
// `bad` (ok.txt removed: the gate fails). Returns {good sha, bad sha}.
std::pair<std::string, std::string> make_gate_repository(const std::filesystem::path& root) {
    const auto work = root / "work";
    std::filesystem::create_directories(work);
    git(work, "init -q");
    tests::write_file(work / ".github/workflows/gate.yml", R"(name: gate
on: [pull_request, merge_group]
jobs:
  check:
    runs-on: ubuntu-latest
    steps:
      - name: the gate
        run: test -f ok.txt && echo "gate passed"
)");
    tests::write_file(work / "ok.txt", "ok\n");
    git(work, "add -A");
    git(work, "commit -q -m good");
    const auto good = head_sha(work);
    git(work, "rm -q ok.txt");
    git(work, "commit -q -m bad");
    const auto bad = head_sha(work);
    git(work, "branch good " + good);
    const auto remote = root / "remotes" / "octo" / "gate.git";
    std::filesystem::create_directories(remote.parent_path());
    REQUIRE(std::system(("git init -q --bare '" + remote.string() + "'").c_str()) == 0);
    git(work, "push -q '" + remote.string() + "' good main:bad");
    return {good, bad};
}

// The job command standing in for `sandgate gate`: clone, check out the SHA, run the
// event's workflows with sandgate run (steps in the wrap), write the run report.
std::string gate_script(const std::string& sandbox_mode) {
    return std::string("#!/bin/sh\nset -e\nwork=\"$SANDGATE_JOB_WORKSPACE\"\n"
                       "git clone -q \"$SANDGATE_JOB_CLONE_URL\" \"$work/repo\"\n"
                       "git -C \"$work/repo\" -c advice.detachedHead=false checkout -q \"$SANDGATE_JOB_SHA\"\n"
                       "exec ") +
           SANDGATE_BINARY + " run \"$SANDGATE_JOB_EVENT\" -C \"$work/repo\" --sandbox " +
           sandbox_mode + " --report \"$SANDGATE_JOB_REPORT\"\n";
}

struct CheckRun {
    std::string name, head_sha, status, conclusion, summary;
};

std::vector<CheckRun> check_runs(const tests::FakeGitHub& server) {
    simdjson::dom::parser parser;
    const std::string text = server.state();
    simdjson::dom::element root;
    REQUIRE(parser.parse(text).get(root) == simdjson::SUCCESS);
    std::vector<CheckRun> out;
    for (auto run : root["check_runs"].get_array()) {
        CheckRun seen;
        std::string_view value;
        seen.name = std::string(std::string_view(run["name"]));
        seen.head_sha = std::string(std::string_view(run["head_sha"]));
        seen.status = std::string(std::string_view(run["status"]));
        if (run["conclusion"].get(value) == simdjson::SUCCESS) seen.conclusion = value;
        if (run["output"]["summary"].get(value) == simdjson::SUCCESS) seen.summary = value;
        out.push_back(seen);
    }
    return out;
}

// Waits until `ready` holds for the server's check runs (a bug hangs the test, see ctest's
// timeout, rather than passing it).
template <typename Ready>
std::vector<CheckRun> wait_runs(const tests::FakeGitHub& server, Ready ready) {
    while (true) {
        auto runs = check_runs(server);
        if (ready(runs)) return runs;
        std::this_thread::sleep_for(100ms);
    }
}

// Every API request body the server recorded for `method` on a path containing `part`.
std::vector<std::string> bodies(const tests::FakeGitHub& server, std::string_view method,
                                std::string_view part) {
    simdjson::dom::parser parser;
    const std::string text = server.requests();
    simdjson::dom::element root;
    REQUIRE(parser.parse(text).get(root) == simdjson::SUCCESS);
    std::vector<std::string> out;
    for (auto item : root["requests"].get_array()) {
        if (std::string_view(item["method"]) != method) continue;
        if (std::string_view(item["target"]).find(part) == std::string_view::npos) continue;
        out.emplace_back(std::string_view(item["body"]));
    }
    return out;
}

std::string github_section(const tests::FakeGitHub& server, const std::filesystem::path& dir,
                           const std::string& extra) {
    tests::write_file(dir / "github-token", std::string(tests::k_fake_token) + "\n");
    std::filesystem::permissions(dir / "github-token", std::filesystem::perms::owner_read |
                                                           std::filesystem::perms::owner_write);
    return "github:\n  repositories: [octo/gate]\n  api_url: " + server.url() +
           "\n  token_file: " + (dir / "github-token").string() + "\n" + extra;
}

}  // namespace

TEST_CASE("end to end: the agent polls GitHub, gates the pull requests in the wrap, and "
          "concludes their check runs") {
    // Inside the dogfood wrap the passing job's gate fails (its persistent job sandbox and
    // steps need namespaces the wrap does not give a nested run); not yet run to ground.
    SKIP_UNDER_WRAP("the job's persistent sandbox needs nested namespaces the wrap refuses");
    tests::FakeGitHub server;
    const auto root = tests::make_temp_dir("e2e");
    const auto [good, bad] = make_gate_repository(root);
    server.post("/_control/repo", R"({"repo":"octo/gate","pulls":[
        {"number":1,"sha":")" + good + R"(","labels":["merge-gate"]},
        {"number":2,"sha":")" + bad + R"(","labels":["merge-gate"]},
        {"number":3,"sha":")" + std::string(40, '3') + R"(","labels":["wip"]}]})");
    const std::string mode = job_sandbox();
    Agent agent(github_section(server, root,
                               "  label: merge-gate\n  poll_seconds: 1\n  clone_url: file://" +
                                   (root / "remotes").string() + "/{repository}.git\n"));
    tests::write_file(agent.dir / "job.sh", gate_script(mode));
    tests::write_file(agent.config, tests::read_file(agent.config) + "  persistent_sandbox: true\n");
    auto daemon = agent.start();
    agent.wait_ready();

    const auto runs = wait_runs(server, [](const std::vector<CheckRun>& seen) {
        return seen.size() == 2 && seen[0].status == "completed" && seen[1].status == "completed";
    });
    std::map<std::string, CheckRun> by_sha;
    for (const auto& run : runs) by_sha[run.head_sha] = run;
    REQUIRE(by_sha.count(good) == 1);
    REQUIRE(by_sha.count(bad) == 1);
    CHECK(by_sha[good].name == "sandgate / gate");
    CHECK(by_sha[good].conclusion == "success");
    CHECK(by_sha[bad].conclusion == "failure");
    CHECK(by_sha[good].summary.find("the gate") != std::string::npos);  // the run report's step
    auto queue = agent.queue();
    auto jobs = *queue->list({});
    REQUIRE(jobs.size() == 2);  // the pull request without the label was not queued
    for (const auto& job : jobs) {
        CHECK(job.spec.source == "poll");
        // The job's sandbox: its policy recorded first, then one exec per step through its
        // broker, with value-free evidence.
        CHECK(job.policy_json.find(R"("mode":")" + mode + "\"") != std::string::npos);
        auto events = *queue->events(job.id);
        int steps = 0;
        for (const auto& event : events)
            if (event.kind == "step") {
                ++steps;
                CHECK(event.body_json.find(R"("exit":)") != std::string::npos);
                CHECK(event.body_json.find("ok.txt") == std::string::npos);  // no argv
            }
        CHECK(steps >= 1);
        CHECK_FALSE(std::filesystem::exists(agent.dir / "state" / "agent" / "work" / std::to_string(job.id)));
    }

    // What GitHub was sent: each run created in_progress, then concluded by a PATCH.
    const auto created = bodies(server, "POST", "/check-runs");
    REQUIRE(created.size() == 2);
    for (const auto& body : created) CHECK(body.find(R"("status":"in_progress")") != std::string::npos);
    const auto patched = bodies(server, "PATCH", "/check-runs/");
    REQUIRE(patched.size() >= 2);
    std::string all;
    for (const auto& body : patched) all += body;
    CHECK(all.find(R"("conclusion":"success")") != std::string::npos);
    CHECK(all.find(R"("conclusion":"failure")") != std::string::npos);
    // Later polls were conditional and answered 304: nothing queued again.
    while (bodies(server, "GET", "/pulls?").size() < 3) std::this_thread::sleep_for(100ms);
    CHECK(server.requests().find(R"("not_modified": true)") != std::string::npos);
    CHECK(queue->list({})->size() == 2);
    ::kill(daemon.pid, SIGTERM);
    CHECK(daemon.wait() == 0);
}

TEST_CASE("kill -9 mid-job with GitHub failing: after restart the run is concluded once "
          "GitHub answers again") {
    tests::FakeGitHub server;
    Agent agent(github_section(server, tests::make_temp_dir("github"), ""));
    auto first = agent.start();
    agent.wait_ready();
    REQUIRE(agent.jobs({"submit", "--repo", "octo/gate", "--sha", sha(5)}) == 0);
    agent.wait_file("started-1");
    wait_runs(server, [](const std::vector<CheckRun>& runs) {
        return runs.size() == 1 && runs[0].status == "in_progress";
    });
    ::kill(first.pid, SIGKILL);
    first.wait();
    server.inject(R"([{"kind":"500","match":"check-runs","count":100000}])");
    auto second = agent.start();
    CHECK(agent.wait_terminal(1) == agent::JobState::failed);
    // The conclusion is owed, and stays owed while GitHub fails.
    while (server.requests().find(R"("fault": "500")") == std::string::npos)
        std::this_thread::sleep_for(100ms);
    CHECK(check_runs(server)[0].status == "in_progress");
    server.post("/_control/faults", R"({"replace": true, "faults": []})");
    const auto runs = wait_runs(server, [](const std::vector<CheckRun>& seen) {
        return seen.size() == 1 && seen[0].status == "completed";
    });
    CHECK(runs[0].conclusion == "failure");
    CHECK(runs[0].head_sha == sha(5));
    ::kill(second.pid, SIGTERM);
    CHECK(second.wait() == 0);
}
