// The agent end to end against the GitHub stand-in (tests/fake_github) and file://
// repositories, with the real `sandgate gate` as its job command in persistent job sandboxes:
// pull requests polled -> jobs -> every step an exec in the job's broker (value-free evidence
// on the job's record) -> check runs concluded; a merge group destroyed mid-job -> cancelled,
// sandbox and workspace gone; kill -9 mid-job -> restart -> concluded, stale sandbox reaped.
#include <signal.h>
#include <simdjson.h>

#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/fake_github/fake_github.hpp"
#include "tests/support/agent_fixture.hpp"
#include "tests/support/egress_server.hpp"
#include "tests/support/wrap_detect.hpp"

using namespace tests::agent_fixture;

namespace {

constexpr const char* k_queue_branch =
    "gh-readonly-queue/main/pr-3-0123456789abcdef0123456789abcdef01234567";

void git(const std::filesystem::path& dir, const std::string& args) {
    const std::string command = "git -C '" + dir.string() +
                                "' -c user.name=sandgate -c user.email=gate@example.com "
                                "-c init.defaultBranch=main " +
                                args + " >/dev/null 2>&1";
    REQUIRE(std::system(command.c_str()) == 0);
}

std::string head_sha(const std::filesystem::path& dir) {
    auto out = dir / ".head";
    REQUIRE(std::system(("git -C '" + dir.string() + "' rev-parse HEAD > '" + out.string() + "'")
                            .c_str()) == 0);
    auto text = tests::read_file(out);
    std::filesystem::remove(out);
    return text.substr(0, 40);
}

constexpr const char* k_secret = "env-value-never-in-evidence-5519";

// The gate's workflow: `ok.txt` decides; GATE_TOKEN is a value no evidence may hold.
constexpr const char* k_gate_workflow = R"YAML(name: gate
on: [pull_request, merge_group]
env:
  GATE_TOKEN: env-value-never-in-evidence-5519
jobs:
  check:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - name: the gate
        run: test -f ok.txt && echo "gate passed"
      - name: the commit, in the job sandbox
        run: test "$(git rev-parse HEAD)" = "$GITHUB_SHA" && echo "token of ${#GATE_TOKEN} bytes"
)YAML";

// A gate that marks its start in its worktree and then waits (until it is stopped).
constexpr const char* k_slow_workflow = R"YAML(name: gate
on: [pull_request, merge_group]
jobs:
  check:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - name: the gate
        run: touch started-mark && sleep 86399
)YAML";

struct GateRepository {
    std::string good, bad, slow;
};

// A bare remote at REMOTES/octo/gate.git: `good` (the gate passes), `bad` (ok.txt removed:
// the gate fails), `slow` (the gate waits until stopped), each also under refs/pull/N/head
// (1, 2, 3) and `slow` as a merge-queue branch, as GitHub has them.
GateRepository make_gate_repository(const std::filesystem::path& root) {
    GateRepository repo;
    const auto work = root / "work";
    std::filesystem::create_directories(work);
    git(work, "init -q");
    tests::write_file(work / ".github/workflows/gate.yml", k_gate_workflow);
    tests::write_file(work / "ok.txt", "ok\n");
    git(work, "add -A");
    git(work, "commit -q -m good");
    repo.good = head_sha(work);
    git(work, "rm -q ok.txt");
    git(work, "commit -q -m bad");
    repo.bad = head_sha(work);
    git(work, "branch good " + repo.good);
    git(work, "checkout -q -b slow " + repo.good);
    tests::write_file(work / ".github/workflows/gate.yml", k_slow_workflow);
    git(work, "commit -q -a -m slow");
    repo.slow = head_sha(work);
    const auto remote = root / "remotes" / "octo" / "gate.git";
    std::filesystem::create_directories(remote.parent_path());
    REQUIRE(std::system(("git init -q --bare '" + remote.string() + "'").c_str()) == 0);
    git(work, "push -q '" + remote.string() +
                  "' good main:bad slow good:refs/pull/1/head "
                  "main:refs/pull/2/head slow:refs/pull/3/head slow:refs/heads/" +
                  k_queue_branch);
    return repo;
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

// Everything a step left on its job's record: the "step" events of its broker execs.
std::vector<std::string> step_events(agent::JobQueue& queue, std::int64_t job) {
    auto events = queue.events(job);
    REQUIRE(events);
    std::vector<std::string> out;
    for (const auto& event : *events) {
        CHECK(event.body_json.find(k_secret) == std::string::npos);  // no env value, anywhere
        CHECK(event.body_json.find("stdin") == std::string::npos);
        if (event.kind == "step") out.push_back(event.body_json);
    }
    return out;
}

// A file named `name` anywhere below `dir` (a step's mark in a worktree of the workspace).
bool exists_below(const std::filesystem::path& dir, const std::string& name) {
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
        if (it->path().filename() == name) return true;
    return false;
}

std::size_t entries(const std::filesystem::path& dir) {
    std::error_code ec;
    std::size_t count = 0;
    for (auto it = std::filesystem::directory_iterator(dir, ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
        ++count;
    return count;
}

// Whether a process whose command line holds `word` is alive (the slow step's sleep).
bool process_with(const std::string& word) {
    std::error_code ec;
    for (const auto& proc : std::filesystem::directory_iterator("/proc", ec)) {
        const auto name = proc.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::string cmdline = tests::read_file(proc.path() / "cmdline");  // empty when gone
        for (auto& c : cmdline)
            if (c == '\0') c = ' ';
        if (cmdline.find(word) != std::string::npos && cmdline.find("sleep") == 0) return true;
    }
    return false;
}

// The agent with the real `sandgate gate` as its job command (persistent sandboxes being
// the default), polling the stand-in every second.
Agent gate_agent(const tests::FakeGitHub& server, const std::filesystem::path& root,
                 const std::string& extra = "") {
    return Agent(github_section(server, root,
                                "  poll_seconds: 1\n  clone_url: file://" +
                                    (root / "remotes").string() + "/{repository}.git\n") +
                     extra,
                 Agent::JobCommand::gate);
}

const agent::Job* job_for(const std::vector<agent::Job>& jobs, const std::string& sha) {
    for (const auto& job : jobs)
        if (job.spec.key.sha == sha) return &job;
    return nullptr;
}

}  // namespace

TEST_CASE(
    "end to end: the agent polls GitHub, gates the pull requests in their job sandboxes, "
    "and concludes their check runs") {
    tests::FakeGitHub server;
    const auto root = tests::make_temp_dir("e2e");
    const auto repo = make_gate_repository(root);
    server.post("/_control/repo", R"({"repo":"octo/gate","pulls":[
        {"number":1,"sha":")" + repo.good +
                                      R"(","labels":["merge-gate"]},
        {"number":2,"sha":")" + repo.bad +
                                      R"(","labels":["merge-gate"]},
        {"number":3,"sha":")" + repo.slow +
                                      R"(","labels":["wip"]}]})");
    Agent agent(github_section(server, root,
                               "  label: merge-gate\n  poll_seconds: 1\n  clone_url: file://" +
                                   (root / "remotes").string() + "/{repository}.git\n"),
                Agent::JobCommand::gate);
    auto daemon = agent.start();
    agent.wait_ready();

    const auto runs = wait_runs(server, [](const std::vector<CheckRun>& seen) {
        return seen.size() == 2 && seen[0].status == "completed" && seen[1].status == "completed";
    });
    std::map<std::string, CheckRun> by_sha;
    for (const auto& run : runs) by_sha[run.head_sha] = run;
    REQUIRE(by_sha.count(repo.good) == 1);
    REQUIRE(by_sha.count(repo.bad) == 1);
    CHECK(by_sha[repo.good].name == "sandgate / gate");
    CHECK(by_sha[repo.good].conclusion == "success");
    CHECK(by_sha[repo.bad].conclusion == "failure");
    CHECK(by_sha[repo.good].summary.find("the gate") !=
          std::string::npos);  // the run report's step
    auto queue = agent.queue();
    auto jobs = *queue->list({});
    REQUIRE(jobs.size() == 2);  // the pull request without the label was not queued
    for (const auto& job : jobs) {
        INFO("job " << job.id << " at " << job.spec.key.sha);
        CHECK(job.spec.source == "poll");
        // The job's sandbox: its policy recorded first (env names, never values), then one
        // exec per step through its broker, each with value-free evidence.
        CHECK(job.policy_json.find(R"("mode":")" + job_sandbox() + "\"") != std::string::npos);
        CHECK(job.policy_json.find("SANDGATE_JOB_SHA") != std::string::npos);
        CHECK(job.policy_json.find(job.spec.key.sha) == std::string::npos);
        const std::string identity =
            "octo/gate@" + job.spec.key.sha + "/" + std::to_string(job.id) + "/1/gate";
        const auto steps = step_events(*queue, job.id);
        // good: `the gate` and `the commit` ran (exit 0, 0); bad: `the gate` failed (exit 1).
        const std::vector<std::string> exits = job.spec.key.sha == repo.good
                                                   ? std::vector<std::string>{"0", "0"}
                                                   : std::vector<std::string>{"1"};
        REQUIRE(steps.size() == exits.size());
        for (std::size_t i = 0; i < steps.size(); ++i) {
            INFO(steps[i]);
            CHECK(steps[i].find(R"("identity":")" + identity + "\"") != std::string::npos);
            CHECK(steps[i].find(R"("posture":{"mode":")" + job_sandbox() +
                                R"(","network":"none"})") != std::string::npos);
            CHECK(steps[i].find(R"("exit":)" + exits[i] + ",") != std::string::npos);
            CHECK(steps[i].find(R"("stdout_bytes":)") != std::string::npos);
            CHECK(steps[i].find(R"("stderr_bytes":)") != std::string::npos);
            CHECK(steps[i].find("ok.txt") == std::string::npos);  // no argv
        }
        CHECK_FALSE(std::filesystem::exists(agent.dir / "state" / "agent" / "work" /
                                            std::to_string(job.id)));
    }
    CHECK(entries(agent.dir / "state" / "sandboxes") == 0);
    CHECK(entries(agent.dir / "state" / "worktrees") ==
          0);  // the gate checked out in the workspace
    const auto log = tests::read_file(agent.dir / "state" / "agent" / "logs" /
                                      (std::to_string(job_for(jobs, repo.good)->id) + ".log"));
    CHECK(log.find("every step runs in the job sandbox") != std::string::npos);
    CHECK(log.find("token of 32 bytes") != std::string::npos);

    // What GitHub was sent: each run created once, in_progress and then concluded by a PATCH,
    // or (a job that ended before its start report went out: the start is dropped) created
    // completed.
    const auto created = bodies(server, "POST", "/check-runs");
    REQUIRE(created.size() == 2);
    const auto patched = bodies(server, "PATCH", "/check-runs/");
    std::size_t started = 0;
    for (const auto& body : created)
        started += body.find(R"("status":"in_progress")") != std::string::npos;
    CHECK(patched.size() >= started);
    std::string all;
    for (const auto& body : created) all += body;
    for (const auto& body : patched) all += body;
    CHECK(all.find(R"("conclusion":"success")") != std::string::npos);
    CHECK(all.find(R"("conclusion":"failure")") != std::string::npos);
    CHECK(all.find(k_secret) == std::string::npos);
    // Later polls were conditional and answered 304: nothing queued again.
    while (bodies(server, "GET", "/pulls?").size() < 3) std::this_thread::sleep_for(100ms);
    CHECK(server.requests().find(R"("not_modified": true)") != std::string::npos);
    CHECK(queue->list({})->size() == 2);
    ::kill(daemon.pid, SIGTERM);
    CHECK(daemon.wait() == 0);
}

TEST_CASE(
    "end to end: a merge group destroyed mid-job cancels the job; its sandbox and "
    "workspace go with it") {
    tests::FakeGitHub server;
    const auto root = tests::make_temp_dir("e2e");
    const auto repo = make_gate_repository(root);
    server.post("/_control/repo", R"({"repo":"octo/gate","refs":[
        {"ref":"refs/heads/)" + std::string(k_queue_branch) +
                                      R"(","sha":")" + repo.slow + R"("}]})");
    Agent agent = gate_agent(server, root);
    auto daemon = agent.start();
    agent.wait_ready();
    const auto work = agent.dir / "state" / "agent" / "work";
    while (!exists_below(work, "started-mark")) std::this_thread::sleep_for(50ms);
    auto queue = agent.queue();
    const auto job = (*queue->list({})).at(0);
    CHECK(job.spec.event == "merge_group");
    CHECK(entries(agent.dir / "state" / "sandboxes") == 1);            // the job's sandbox, alive
    while (!process_with("86399")) std::this_thread::sleep_for(20ms);  // its step, running

    server.post("/_control/repo", R"({"repo":"octo/gate","refs":[]})");  // the group is gone
    CHECK(agent.wait_terminal(job.id) == agent::JobState::cancelled);
    CHECK((*queue->get(job.id))->reason.find("merge-queue branch is gone") != std::string::npos);
    // Torn down before the job was seen finished: the broker, its step and the workspace.
    CHECK(entries(agent.dir / "state" / "sandboxes") == 0);
    CHECK_FALSE(std::filesystem::exists(work / std::to_string(job.id)));
    while (process_with("86399")) std::this_thread::sleep_for(50ms);
    const auto runs = wait_runs(server, [](const std::vector<CheckRun>& seen) {
        return seen.size() == 1 && seen[0].status == "completed";
    });
    CHECK(runs[0].conclusion == "cancelled");
    CHECK(runs[0].head_sha == repo.slow);
    ::kill(daemon.pid, SIGTERM);
    CHECK(daemon.wait() == 0);
}

TEST_CASE(
    "end to end: kill -9 mid-job; the restarted agent concludes the job, its check run, "
    "and reaps the stale sandbox") {
    tests::FakeGitHub server;
    const auto root = tests::make_temp_dir("e2e");
    const auto repo = make_gate_repository(root);
    server.post("/_control/repo", R"({"repo":"octo/gate","pulls":[
        {"number":3,"sha":")" + repo.slow +
                                      R"(","labels":[]}]})");
    Agent agent = gate_agent(server, root);
    auto first = agent.start();
    agent.wait_ready();
    const auto work = agent.dir / "state" / "agent" / "work";
    while (!exists_below(work, "started-mark")) std::this_thread::sleep_for(50ms);
    wait_runs(server, [](const std::vector<CheckRun>& seen) {
        return seen.size() == 1 && seen[0].status == "in_progress";
    });
    while (*agent.queue()->owed_reports(std::nullopt) > 0)
        std::this_thread::sleep_for(50ms);  // as below
    ::kill(first.pid, SIGKILL);
    first.wait();
    // The dead agent's sandbox is still on disk; nobody owns it.
    CHECK(entries(agent.dir / "state" / "sandboxes") == 1);

    auto second = agent.start();
    const auto job = (*agent.queue()->list({})).at(0);
    CHECK(agent.wait_terminal(job.id) == agent::JobState::failed);
    CHECK((*agent.queue()->get(job.id))->reason.find("test-agent") != std::string::npos);
    const auto runs = wait_runs(server, [](const std::vector<CheckRun>& seen) {
        return seen.size() == 1 && seen[0].status == "completed";
    });
    CHECK(runs[0].conclusion == "failure");
    agent.wait_ready();  // reaping happens before the API listens
    CHECK(entries(agent.dir / "state" / "sandboxes") == 0);
    CHECK_FALSE(std::filesystem::exists(work / std::to_string(job.id)));
    while (process_with("86399")) std::this_thread::sleep_for(50ms);
    ::kill(second.pid, SIGTERM);
    CHECK(second.wait() == 0);
}

TEST_CASE(
    "kill -9 mid-job with GitHub failing: after restart the run is concluded once "
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
    // The start report marked sent too: killed between the two, its round would hold the job's
    // later reports until that report's lease (k_report_lease, 90 s) ends.
    while (*agent.queue()->owed_reports(std::nullopt) > 0) std::this_thread::sleep_for(50ms);
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

TEST_CASE("job.persistent_sandbox: false keeps a fresh wrap per step: no job sandbox, no broker") {
    const auto root = tests::make_temp_dir("e2e");
    const auto repo = make_gate_repository(root);
    Agent agent(
        "github:\n  clone_url: file://" + (root / "remotes").string() + "/{repository}.git\n",
        Agent::JobCommand::gate);
    tests::write_file(agent.config,
                      tests::read_file(agent.config) + "  persistent_sandbox: false\n");
    auto daemon = agent.start();
    agent.wait_ready();
    REQUIRE(agent.jobs({"submit", "--repo", "octo/gate", "--sha", repo.good, "--event",
                        "merge_group"}) == 0);
    const auto job = (*agent.queue()->list({})).at(0);
    CHECK(agent.wait_terminal(job.id) == agent::JobState::succeeded);
    CHECK((*agent.queue()->get(job.id))->policy_json.empty());  // no sandbox was created
    // Each step in a wrap of its own leaves its evidence on the job all the same, no broker's.
    const auto steps = step_events(*agent.queue(), job.id);
    CHECK(steps.size() == 2);
    for (const auto& step : steps) CHECK(step.find("\"identity\"") == std::string::npos);
    CHECK(entries(agent.dir / "state" / "sandboxes") == 0);
    const auto log = tests::read_file(agent.dir / "state" / "agent" / "logs" /
                                      (std::to_string(job.id) + ".log"));
    CHECK(log.find("gate passed") != std::string::npos);
    CHECK(log.find("every step runs in the job sandbox") == std::string::npos);
    CHECK(log.find((agent.dir / "state" / "worktrees").string()) !=
          std::string::npos);  // today's path
    ::kill(daemon.pid, SIGTERM);
    CHECK(daemon.wait() == 0);
}

TEST_CASE(
    "job.network: allowlist: every step gets a proxy of its own; its connections are on the "
    "job's record and in its report, a refusal in the job's log") {
    SKIP_UNDER_WRAP("the allowlist needs bwrap, which cannot nest inside the wrap");
    const auto root = tests::make_temp_dir("e2e");
    tests::EgressServer http(root, "http", false);
    const std::string port = http.port_text();
    const auto work = root / "work";
    std::filesystem::create_directories(work);
    git(work, "init -q");
    tests::write_file(work / ".github/workflows/gate.yml",
                      "name: gate\non: [merge_group]\njobs:\n  fetch:\n    runs-on: ubuntu-latest\n"
                      "    steps:\n      - name: allowed\n        run: env -u NO_PROXY -u no_proxy "
                      "curl -sS --max-time 60 http://localhost:" +
                          port +
                          "/hello\n      - name: refused\n        run: curl -sS --max-time 60 "
                          "http://example.org/ || true\n");
    git(work, "add -A");
    git(work, "commit -q -m egress");
    const auto sha = head_sha(work);
    const auto remote = root / "remotes" / "octo" / "egress.git";
    std::filesystem::create_directories(remote.parent_path());
    REQUIRE(std::system(("git init -q --bare '" + remote.string() + "'").c_str()) == 0);
    git(work, "push -q '" + remote.string() + "' HEAD:main");
    Agent agent(
        "github:\n  clone_url: file://" + (root / "remotes").string() + "/{repository}.git\n",
        Agent::JobCommand::gate);
    tests::write_file(agent.config,
                      tests::read_file(agent.config) +
                          "  network: allowlist\n  allow_egress: [\"localhost:" + port +
                          "\"]\n  allow_egress_ranges: [127.0.0.1/32, \"::1\"]\n");
    auto daemon = agent.start();
    agent.wait_ready();
    REQUIRE(agent.jobs(
                {"submit", "--repo", "octo/egress", "--sha", sha, "--event", "merge_group"}) == 0);
    const auto job = (*agent.queue()->list({})).at(0);
    const auto state = agent.wait_terminal(job.id);
    const auto log = tests::read_file(agent.dir / "state" / "agent" / "logs" /
                                      (std::to_string(job.id) + ".log"));
    INFO(log);
    CHECK(state == agent::JobState::succeeded);
    CHECK((*agent.queue()->get(job.id))->policy_json.empty());  // no job sandbox
    CHECK(log.find("hello from the host (host=localhost:" + port + ")") != std::string::npos);
    CHECK(log.find("egress refused: example.org:80 (not on the allowlist)") != std::string::npos);
    const auto steps = step_events(*agent.queue(), job.id);
    REQUIRE(steps.size() == 2);
    CHECK(steps[0].find(R"("network":"allowlist")") != std::string::npos);
    CHECK(steps[0].find(R"("egress":{"connections":[{"host":"localhost","port":)" + port +
                        R"(,"verdict":"allowed",)") != std::string::npos);
    CHECK(steps[1].find(R"({"host":"example.org","port":80,"verdict":"refused","reason":"not on )"
                        R"(the allowlist","address":null)") != std::string::npos);
    const auto report = tests::read_file(agent.dir / "state" / "agent" / "reports" /
                                         (std::to_string(job.id) + ".json"));
    // The report is indented: compared in its compact form, key order kept.
    const auto compact = nlohmann::ordered_json::parse(report, nullptr, false).dump();
    CHECK(compact.find(R"("verdict":"refused","reason":"not on the allowlist")") !=
          std::string::npos);
    ::kill(daemon.pid, SIGTERM);
    CHECK(daemon.wait() == 0);
}
