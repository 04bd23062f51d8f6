// sandgate gate inside the agent's persistent job sandbox: the environment the daemon hands a
// job (SANDGATE_BROKER_SOCKET, SANDGATE_BROKER_IDENTITY, SANDGATE_JOB_WORKSPACE, plus
// SANDGATE_JOB_ID and SANDGATE_STATE_DIR for the evidence) around a real broker made by
// agent::SandboxManager, as the daemon makes it. The gate must check out inside the
// workspace, send every step to the broker, report exactly what the direct path reports, and
// fail (never run on the host) when the broker refuses or is gone.
#include <signal.h>
#include <simdjson.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "agent/sandboxes/sandbox_manager.hpp"
#include "agent/store/job_store.hpp"
#include "jobs/git/git_mirror.hpp"
#include "jobs/git/git_mirror_layout.hpp"
#include "sandbox/broker/broker.hpp"
#include "tests/helpers/git_fixture.hpp"
#include "tests/helpers/mirror_attack.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// Inside the dogfood wrap a nested bwrap cannot mount /proc (and nested user namespaces are
// disabled), so there the broker and the direct path's steps run unwrapped.
sandbox::SandboxMode mode() {
    return tests::under_wrap() ? sandbox::SandboxMode::off : sandbox::SandboxMode::bwrap;
}
std::string mode_name() {
    return std::string(sandbox::to_string(mode()));
}

constexpr const char* k_secret = "evidence-never-holds-7731";

const char* k_workflow = R"YAML(name: gate
on: merge_group
env:
  GATE_TOKEN: evidence-never-holds-7731
jobs:
  build:
    runs-on: ubuntu-latest
    outputs:
      answer: ${{ steps.produce.outputs.answer }}
    steps:
      - uses: actions/checkout@v4
      - name: the commit, clean
        run: |
          test "$(git rev-parse HEAD)" = "$GITHUB_SHA"
          test -z "$(git status --porcelain)"
          git log --oneline | wc -l
          grep -q good app.txt
      - id: produce
        run: |
          echo "answer=42" >> "$GITHUB_OUTPUT"
          echo built > built.txt
      - name: the worktree persists between steps
        run: test "$(cat built.txt)" = built && test "${{ steps.produce.outputs.answer }}" = 42
      - name: allowed to fail
        continue-on-error: true
        run: |
          echo "::warning file=app.txt,line=1::careful"
          exit 3
      - name: only after a failure
        if: failure()
        run: echo "an earlier step failed"
  after:
    needs: build
    runs-on: ubuntu-latest
    steps:
      - run: test "${{ needs.build.outputs.answer }}" = 42 && echo "token of ${#GATE_TOKEN} bytes"
)YAML";

// Two steps that print the pid namespace they run in (-W .github/ns).
const char* k_namespace_workflow = R"YAML(name: ns
on: merge_group
jobs:
  ns:
    runs-on: ubuntu-latest
    steps:
      - run: echo "pidns=$(readlink /proc/self/ns/pid)"
      - run: echo "pidns=$(readlink /proc/self/ns/pid)"
)YAML";

// Two legs that run at once in the direct path; in a job sandbox their steps take turns.
const char* k_parallel_workflow = R"YAML(name: parallel
on: merge_group
jobs:
  legs:
    strategy:
      matrix:
        leg: [1, 2, 3]
    runs-on: ubuntu-latest
    steps:
      - run: sleep 0.3 && echo "leg ${{ matrix.leg }} ran"
      - run: echo "leg ${{ matrix.leg }} again"
  alone:
    runs-on: ubuntu-latest
    steps:
      - run: sleep 0.3 && echo "alone ran"
)YAML";

struct Repo {
    fs::path path;
    std::string good, bad;
};

Repo make_repo(const fs::path& dir) {
    Repo repo;
    repo.path = dir / "origin";
    tests::make_repo(repo.path, {{".github/workflows/gate.yml", k_workflow},
                                 {".github/ns/ns.yml", k_namespace_workflow},
                                 {".github/parallel/parallel.yml", k_parallel_workflow},
                                 {"app.txt", "good\n"}});
    repo.good = tests::commit_file(repo.path, "more.txt", "more\n");
    repo.bad = tests::commit_file(repo.path, "app.txt", "broken\n");
    return repo;
}

// The job queue, the job's record and its sandbox, as the daemon makes them.
struct JobSandbox {
    fs::path state;
    fs::path workspace;
    std::unique_ptr<agent::JobQueue> queue;
    std::int64_t job = 0;
    agent::SandboxIdentity identity;
    std::unique_ptr<agent::SandboxManager> manager;
    agent::SandboxInfo box;

    // `remote`: the repository the job is for, whose mirror scope is bound as the daemon does.
    JobSandbox(const fs::path& dir, const std::string& sha, const std::string& remote,
               sandbox::NetworkMode network = sandbox::NetworkMode::none)
        : state(dir / "state") {
        fs::create_directories(state);
        state = fs::canonical(state);
        workspace = state / "agent" / "work" / "1";
        fs::create_directories(workspace / "tmp");
        queue = std::move(*agent::open_sqlite_queue(agent::default_queue_path(state)));
        agent::JobSpec spec;
        spec.key = {"local/origin", sha, "", 1};
        job = (*queue->submit(spec)).job.id;
        identity = {"local/origin", sha, job, 1, "gate"};
        manager = std::make_unique<agent::SandboxManager>(
            agent::ManagerConfig{state, SANDGATE_BINARY, queue.get(), 30s});
        agent::SandboxOptions options;
        options.policy.mode = mode();
        options.policy.network = network;
        auto scope = jobs::MirrorCache(state).scope_dir(remote);
        REQUIRE(scope);
        options.policy.read_only.push_back(*scope);
        options.worktree = workspace;
        options.ttl = 600s;
        options.job = job;
        options.env_names = {"PATH", "SANDGATE_JOB_ID"};
        auto created = manager->create(identity, options);
        if (!created) FAIL("the job sandbox: " << created.error().message);
        box = *created;
    }

    // The environment the daemon gives the job process (identity overridable).
    std::string env(const std::string& identity_text) const {
        return "env -u SANDGATE_GIT_TOKEN SANDGATE_BROKER_SOCKET='" + box.socket.string() +
               "' SANDGATE_BROKER_IDENTITY='" + identity_text + "' SANDGATE_JOB_WORKSPACE='" +
               workspace.string() + "' SANDGATE_JOB_ID=" + std::to_string(job) +
               " SANDGATE_STATE_DIR='" + state.string() + "' TMPDIR='" +
               (workspace / "tmp").string() + "' ";
    }

    std::vector<std::string> steps() const {
        std::vector<std::string> out;
        auto events = queue->events(job);
        REQUIRE(events);
        for (const auto& event : *events)
            if (event.kind == "step") out.push_back(event.body_json);
        return out;
    }
};

tests::ShellResult gate(const std::string& env, const std::string& args) {
    return tests::shell(env + SANDGATE_BINARY + " gate --sandbox " + mode_name() + " " + args +
                        " 2>&1");
}

// The report as text without its durations (which differ from run to run).
void flatten(simdjson::dom::element value, const std::string& at, std::string& out) {
    switch (value.type()) {
        case simdjson::dom::element_type::OBJECT:
            for (auto field : value.get_object()) {
                if (field.key == "duration_ms") continue;
                flatten(field.value, at + "/" + std::string(field.key), out);
            }
            break;
        case simdjson::dom::element_type::ARRAY: {
            int i = 0;
            for (auto item : value.get_array()) flatten(item, at + "/" + std::to_string(i++), out);
            break;
        }
        default:
            out += at + "=" + simdjson::to_string(value) + "\n";
    }
}

std::string normalised_report(const fs::path& file) {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    REQUIRE(parser.load(file.string()).get(root) == simdjson::SUCCESS);
    std::string out;
    flatten(root, "", out);
    return out;
}

std::size_t entries(const fs::path& dir) {
    std::error_code ec;
    std::size_t count = 0;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec))
        ++count;
    return count;
}

}  // namespace

TEST_CASE(
    "under a job sandbox the gate checks out in the workspace, sends every step to the "
    "broker, and reports exactly as the direct path") {
    const auto dir = tests::make_temp_dir("gate-sandbox");
    const Repo repo = make_repo(dir);
    for (const auto& [sha, verdict] : {std::pair{repo.good, 0}, std::pair{repo.bad, 1}}) {
        JobSandbox job(dir / sha.substr(0, 8), sha, repo.path.string());
        const std::string args = "--repo file://" + repo.path.string() + " --sha " + sha +
                                 " --state-dir " + job.state.string() + " --report ";
        auto direct = gate("env -u SANDGATE_GIT_TOKEN ", args + (dir / "direct.json").string());
        INFO(direct.out);
        REQUIRE(direct.code == verdict);
        auto brokered =
            gate(job.env(job.identity.canonical()), args + (dir / "broker.json").string());
        INFO(brokered.out);
        CHECK(brokered.code == verdict);
        CHECK_THAT(brokered.out, Catch::Contains("every step runs in the job sandbox " +
                                                 job.identity.canonical()));
        CHECK(normalised_report(dir / "broker.json") == normalised_report(dir / "direct.json"));

        // One exec per step that ran (checkout is built in), each with value-free evidence.
        const auto steps = job.steps();
        const std::vector<std::string> exits =
            verdict == 0 ? std::vector<std::string>{"0", "0", "0", "3", "0"}
                         : std::vector<std::string>{"1", "0"};
        REQUIRE(steps.size() == exits.size());
        for (std::size_t i = 0; i < steps.size(); ++i) {
            INFO(steps[i]);
            CHECK_THAT(steps[i],
                       Catch::Contains("\"identity\":\"" + job.identity.canonical() + "\""));
            CHECK_THAT(steps[i], Catch::Contains("\"posture\":{\"mode\":\"" + mode_name() +
                                                 "\",\"network\":\"none\"}"));
            CHECK_THAT(steps[i], Catch::Contains("\"exit\":" + exits[i] + ","));
            CHECK_THAT(steps[i], Catch::Contains("\"stdout_bytes\":"));
            CHECK_THAT(steps[i], Catch::Contains("\"stderr_bytes\":"));
            CHECK(steps[i].find(k_secret) == std::string::npos);
            CHECK(steps[i].find("GATE_TOKEN") == std::string::npos);
            CHECK(steps[i].find("git rev-parse") == std::string::npos);  // no argv either
        }
        // The worktrees and the scratch lay in the workspace, and are gone; the state
        // directory's own worktree area was not used.
        CHECK(entries(job.workspace / "worktrees") == 0);
        CHECK(entries(job.workspace / "tmp") == 0);
        CHECK(entries(job.state / "worktrees") == 0);
        REQUIRE(job.manager->destroy(job.box.id));
    }
}

TEST_CASE("the steps of a gate in a job sandbox share the broker's namespaces") {
    const auto dir = tests::make_temp_dir("gate-sandbox");
    const Repo repo = make_repo(dir);
    JobSandbox job(dir, repo.good, repo.path.string());
    sandbox::BrokerRequest ping;
    ping.op = sandbox::BrokerOp::ping;
    auto status = sandbox::broker_call(job.box.socket, ping);
    REQUIRE(status);
    REQUIRE(status->status);
    auto run = gate(job.env(job.identity.canonical()),
                    "-W .github/ns --repo " + repo.path.string() + " --sha " + repo.good +
                        " --state-dir " + job.state.string());
    INFO(run.out);
    REQUIRE(run.code == 0);
    const std::string seen = "pidns=" + status->status->pid_namespace;
    const auto first = run.out.find(seen);
    REQUIRE(first != std::string::npos);
    CHECK(run.out.find(seen, first + 1) != std::string::npos);  // both steps
    CHECK(job.steps().size() == 2);
}

TEST_CASE("a refused or unreachable broker fails the step and never runs it on the host") {
    const auto dir = tests::make_temp_dir("gate-sandbox");
    const auto marker = dir / "ran-on-the-host";
    const auto origin = dir / "origin";
    tests::make_repo(origin, {{".github/workflows/gate.yml",
                               "on: merge_group\njobs:\n  j:\n    runs-on: ubuntu-latest\n"
                               "    steps:\n      - run: touch " +
                                   marker.string() + "\n"}});
    const std::string sha =
        tests::sh("git -C " + origin.string() + " rev-parse HEAD").substr(0, 40);
    JobSandbox job(dir, sha, origin.string());
    const std::string args =
        "--repo " + origin.string() + " --sha " + sha + " --state-dir " + job.state.string();

    auto wrong = gate(job.env("octo/other@" + sha + "/1/1/gate"), args);
    INFO(wrong.out);
    CHECK(wrong.code == 1);
    CHECK_THAT(wrong.out, Catch::Contains("refused the step (identity)"));
    auto steps = job.steps();
    REQUIRE(steps.size() == 1);
    CHECK_THAT(steps[0], Catch::Contains("\"refusal\":\"identity\""));

    REQUIRE(job.manager->destroy(job.box.id));
    auto gone = gate(job.env(job.identity.canonical()), args);
    INFO(gone.out);
    CHECK(gone.code == 1);
    CHECK_THAT(gone.out, Catch::Contains("broker unreachable"));
    CHECK(job.steps().size() == 2);

    // Half the environment is a mistake, not a reason to run on the host.
    auto half =
        gate("env -u SANDGATE_BROKER_IDENTITY SANDGATE_BROKER_SOCKET=" + job.box.socket.string() +
                 " SANDGATE_JOB_WORKSPACE=" + job.workspace.string() + " ",
             args);
    INFO(half.out);
    CHECK(half.code == 2);
    CHECK_THAT(half.out, Catch::Contains("SANDGATE_BROKER_IDENTITY is not set"));
    auto no_workspace =
        gate("env -u SANDGATE_JOB_WORKSPACE SANDGATE_BROKER_SOCKET=" + job.box.socket.string() +
                 " SANDGATE_BROKER_IDENTITY=x ",
             args);
    CHECK(no_workspace.code == 2);
    CHECK_THAT(no_workspace.out, Catch::Contains("SANDGATE_JOB_WORKSPACE is not set"));
    CHECK_FALSE(fs::exists(marker));

    // A job sandbox weaker than the gate's flags ask for (the host's network where none was
    // asked) runs nothing.
    JobSandbox open(dir / "open", sha, origin.string(), sandbox::NetworkMode::host);
    auto weaker = gate(open.env(open.identity.canonical()), args + " --network none");
    INFO(weaker.out);
    CHECK(weaker.code == 2);
    CHECK_THAT(weaker.out, Catch::Contains("is weaker than asked"));
    CHECK(open.steps().empty());
    CHECK_FALSE(fs::exists(marker));
}

TEST_CASE("parallel legs of a gate in a job sandbox take turns at the broker, none refused busy") {
    const auto dir = tests::make_temp_dir("gate-sandbox");
    const Repo repo = make_repo(dir);
    JobSandbox job(dir, repo.good, repo.path.string());
    auto run = gate(job.env(job.identity.canonical()),
                    "-W .github/parallel --repo " + repo.path.string() + " --sha " + repo.good +
                        " --state-dir " + job.state.string());
    INFO(run.out);
    CHECK(run.code == 0);
    for (const char* line : {"leg 1 ran", "leg 2 ran", "leg 3 ran", "leg 3 again", "alone ran"})
        CHECK_THAT(run.out, Catch::Contains(line));
    const auto steps = job.steps();
    CHECK(steps.size() == 7);
    for (const auto& step : steps) CHECK_THAT(step, Catch::Contains("\"exit\":0,"));
}

namespace {

// Repository `app` (submodule `lib`, which has `leaf`) and repository `secret`, mirrored in
// the same state directory first. app's workflow checks git in its worktree and in both
// submodules' worktrees, then tries every read of secret's mirror it can think of, printing
// "LEAK <how>" for each that works (the word is split in the script, so only a read that
// worked prints it).
struct TwoRepositories {
    fs::path app;
    std::string app_sha;
    fs::path secret_scope;
};

TwoRepositories make_two_repositories(const fs::path& dir, const fs::path& state) {
    tests::make_repo(dir / "secret", {{"s.txt", "the secret repository\n"}});
    const std::string secret_sha =
        tests::sh("git -C " + (dir / "secret").string() + " rev-parse HEAD");
    auto secret = jobs::MirrorCache(state).ensure_commit(
        jobs::MirrorRequest{(dir / "secret").string(), secret_sha, "", std::nullopt, ""});
    REQUIRE(secret);
    const std::string allow = "git -c protocol.file.allow=always ";
    tests::make_repo(dir / "leaf", {{"leaf.txt", "leaf\n"}});
    tests::make_repo(dir / "lib", {{"lib.txt", "lib\n"}});
    tests::sh("cd " + (dir / "lib").string() + " && " + allow +
              "submodule -q add ../leaf deps/leaf && git commit -qm leaf");
    const std::string workflow = R"YAML(name: gate
on: merge_group
jobs:
  check:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          submodules: recursive
      - name: git in the repository
        run: git log --oneline | grep -q " lib$" && test -z "$(git status --porcelain)" && echo "own""-ok"
      - name: git in the submodules
        run: |
          cd lib && git log --oneline | grep -q leaf && test -z "$(git status --porcelain)" && grep -q lib lib.txt
          cd deps/leaf && git log --oneline | grep -q initial && test -z "$(git status --porcelain)" && echo "sub""-ok"
      - name: another repository's mirror
        run: |
)YAML" + tests::indent_lines(tests::mirror_attack_lines(state / "mirrors", secret->scope,
                                                        secret->gitdir, secret_sha),
                             10);
    TwoRepositories two;
    two.app = dir / "app";
    two.secret_scope = secret->scope;
    tests::make_repo(two.app, {{".github/workflows/gate.yml", workflow}});
    tests::sh("cd " + two.app.string() + " && " + allow +
              "submodule -q add ../lib lib && git commit -qm lib");
    two.app_sha = tests::sh("git -C " + two.app.string() + " rev-parse HEAD");
    return two;
}

// The app's gate, on the direct path (a wrap per step) and in its job sandbox.
std::pair<tests::ShellResult, tests::ShellResult> gate_app(const fs::path& dir) {
    const fs::path state = fs::canonical(dir) / "state";  // JobSandbox's
    const TwoRepositories two = make_two_repositories(dir, state);
    JobSandbox job(dir, two.app_sha, two.app.string());
    REQUIRE(job.state == state);
    const std::string args =
        "--repo " + two.app.string() + " --sha " + two.app_sha + " --state-dir " + state.string();
    auto direct = gate("env -u SANDGATE_GIT_TOKEN ", args);
    auto brokered = gate(job.env(job.identity.canonical()), args);
    return {direct, brokered};
}

}  // namespace

TEST_CASE("in a job sandbox git works in the repository and in its submodules' worktrees") {
    const auto dir = tests::make_temp_dir("gate-sandbox");
    const auto [direct, brokered] = gate_app(dir);
    for (const auto* run : {&direct, &brokered}) {
        INFO(run->out);
        CHECK(run->code == 0);
        CHECK_THAT(run->out, Catch::Contains("own-ok") && Catch::Contains("sub-ok") &&
                                 Catch::Contains("attack-done"));
    }
}

TEST_CASE("threat row 3: a step cannot read another repository's mirror, on either path") {
    SKIP_UNDER_WRAP("a nested bwrap cannot run inside the wrap: the steps run unwrapped there");
    const auto dir = tests::make_temp_dir("gate-sandbox");
    const auto [direct, brokered] = gate_app(dir);
    for (const auto* run : {&direct, &brokered}) {
        INFO(run->out);
        CHECK(run->code == 0);
        CHECK_THAT(run->out, Catch::Contains("attack-done"));
        CHECK_THAT(run->out, !Catch::Contains("LEAK"));
    }
}

TEST_CASE(
    "threat row 3: a submodule whose URL points into the state directory is refused, nothing of it "
    "fetched") {
    const auto dir = tests::make_temp_dir("gate-sandbox");
    const fs::path state = fs::canonical(dir) / "state";
    const TwoRepositories two = make_two_repositories(dir, state);
    // The pull request's next commit points a submodule at secret's mirror by its path.
    tests::sh("cd " + two.app.string() + " && git -c protocol.file.allow=always submodule -q add " +
              (dir / "secret").string() + " sec && git config -f .gitmodules submodule.sec.url " +
              (two.secret_scope / "repo.git").string() +
              " && git add .gitmodules && git commit -qm sec");
    const std::string sha = tests::sh("git -C " + two.app.string() + " rev-parse HEAD");
    auto run = gate("env -u SANDGATE_GIT_TOKEN ", "--repo " + two.app.string() + " --sha " + sha +
                                                      " --state-dir " + state.string());
    INFO(run.out);
    CHECK(run.code == 1);
    CHECK_THAT(run.out, Catch::Contains("lies inside the state directory; refused"));
    CHECK_THAT(run.out, !Catch::Contains("attack-done"));  // no step after the checkout ran
    // app's scope holds its own mirror and its two submodules' (lib, leaf), nothing of secret's.
    auto scope = jobs::make_mirror_scope(state, two.app.string());
    REQUIRE(scope);
    CHECK(entries(*scope / "modules") == 2);
    CHECK_FALSE(fs::exists(
        *scope / "modules" /
        (jobs::mirror_dir_name(*jobs::parse_remote((two.secret_scope / "repo.git").string())) +
         ".git")));
}

TEST_CASE(
    "SIGTERM to a gate in a job sandbox stops its brokered step mid-way; always() still runs") {
    const auto dir = tests::make_temp_dir("gate-sandbox");
    const std::string marker = tests::unique_marker();
    const auto origin = dir / "origin";
    // The step ignores SIGTERM and would sleep 600 s: a cancel that does not reach the broker
    // hangs the test (the broker stays busy, the marked process alive).
    tests::make_repo(origin,
                     {{".github/workflows/gate.yml",
                       "on: merge_group\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n"
                       "      - run: trap '' TERM; exec -a " +
                           marker +
                           " sleep 600\n"
                           "      - if: always()\n        run: echo cleaned-up\n"}});
    const std::string sha =
        tests::sh("git -C " + origin.string() + " rev-parse HEAD").substr(0, 40);
    JobSandbox job(dir, sha, origin.string());
    const std::string command = "exec " + job.env(job.identity.canonical()) + SANDGATE_BINARY +
                                " gate --sandbox " + mode_name() + " --repo " + origin.string() +
                                " --sha " + sha + " --state-dir " + job.state.string() + " > '" +
                                (dir / "out.txt").string() + "' 2>&1";
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    REQUIRE(pid > 0);
    while (tests::processes_with(marker).empty()) std::this_thread::sleep_for(20ms);
    const int status = tests::signal_and_wait(pid, SIGTERM);
    INFO(tests::read_file(dir / "out.txt"));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 143);  // the cancelled run's 128 + SIGTERM
    CHECK(tests::processes_with(marker).empty());
    const auto steps = job.steps();
    REQUIRE(steps.size() == 2);
    CHECK_THAT(steps[0], Catch::Contains("\"error\":\"cancelled\""));
    CHECK_THAT(steps[1], Catch::Contains("\"exit\":0,"));
    CHECK_THAT(tests::read_file(dir / "out.txt"), Catch::Contains("cleaned-up"));
}
