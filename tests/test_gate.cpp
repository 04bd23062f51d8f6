// sandgate gate end to end: real repositories with workflows, file:// and path remotes, the
// real binary, the exit codes, concurrent gates on one mirror, cleanup that does not follow a
// planted symlink, and the token never shown.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <future>
#include <map>
#include <string>
#include <vector>

#include <simdjson.h>

#include "jobs/git_worktree.hpp"
#include "tests/fake_github/fake_github.hpp"
#include "tests/helpers/git_fixture.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace fs = std::filesystem;
using tests::sh;

namespace {

// Steps run in bwrap; inside sandgate's own wrap (the dogfood run) a nested wrap cannot mount
// /proc, so there the gate runs its steps unwrapped: the git layer is what is tested here.
std::string sandbox_flag() { return tests::under_wrap() ? " --sandbox off" : " --sandbox bwrap"; }

const char* k_workflow = R"YAML(name: gate
on: [merge_group, push]
jobs:
  check:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - name: the commit, clean, with history
        run: |
          test "$(git rev-parse HEAD)" = "$GITHUB_SHA"
          test -z "$(git status --porcelain)"
          git log --oneline
          cat app.txt
          grep -q good app.txt
)YAML";

const char* k_pull_workflow = R"YAML(name: pr
on: pull_request
jobs:
  lint:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0
      - run: test "$(git rev-list --count HEAD)" -ge 2
  other:
    runs-on: ubuntu-latest
    steps:
      - run: exit 1
)YAML";

struct Repo {
    fs::path path;
    std::string good;  // a commit whose gate passes
    std::string bad;   // a commit whose gate fails
};

Repo make_gate_repo(const fs::path& dir) {
    Repo repo;
    repo.path = dir / "origin";
    tests::make_repo(repo.path, {{".github/workflows/gate.yml", k_workflow},
                                 {".github/workflows/pr.yml", k_pull_workflow},
                                 {"app.txt", "good\n"}});
    repo.good = tests::commit_file(repo.path, "more.txt", "more\n");
    repo.bad = tests::commit_file(repo.path, "app.txt", "broken\n");
    sh("git -C " + repo.path.string() + " checkout -q " + repo.good);
    return repo;
}

tests::ShellResult gate(const std::string& args) {
    return tests::shell(std::string("env -u SANDGATE_GIT_TOKEN ") + SANDGATE_BINARY + " gate" + sandbox_flag() + " " + args);
}

int worktree_dirs(const fs::path& state) {
    int count = 0;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(state / "worktrees", ec)) count += entry.is_directory() ? 1 : 0;
    return count;
}

}  // namespace

TEST_CASE("a gate passes on a good commit and fails on a bad one") {
    const auto dir = tests::make_temp_dir("gate");
    const Repo repo = make_gate_repo(dir);
    const std::string state = " --state-dir " + (dir / "state").string();

    auto passed = gate("--repo file://" + repo.path.string() + " --sha " + repo.good + state + " --report " + (dir / "good.json").string());
    INFO(passed.out);
    CHECK(passed.code == 0);
    CHECK_THAT(passed.out, Catch::Contains("passed"));
    CHECK_THAT(tests::read_file(dir / "good.json"), Catch::Contains("\"success\""));
    CHECK(worktree_dirs(dir / "state") == 0);

    auto failed = gate("--repo " + repo.path.string() + " --sha " + repo.bad + state + " --report " + (dir / "bad.json").string());
    INFO(failed.out);
    CHECK(failed.code == 1);
    CHECK_THAT(failed.out, Catch::Contains("check"));
    CHECK_THAT(tests::read_file(dir / "bad.json"), Catch::Contains("\"failure\""));
    CHECK(worktree_dirs(dir / "state") == 0);
}

TEST_CASE("the event selects the workflows, -j the jobs") {
    const auto dir = tests::make_temp_dir("gate");
    const Repo repo = make_gate_repo(dir);
    const std::string common = "--repo " + repo.path.string() + " --state-dir " + (dir / "state").string();
    auto lint = gate(common + " --sha " + repo.good + " --event pull_request -j lint --ref feature");
    INFO(lint.out);
    CHECK(lint.code == 0);
    auto all = gate(common + " --sha " + repo.good + " --event pull_request");
    INFO(all.out);
    CHECK(all.code == 1);  // `other` fails
    auto push = gate(common + " --sha " + repo.good + " --event push --ref main");
    CHECK(push.code == 0);
}

// Two workflows: one on every push/pull request, one only when src/ changed.
const char* k_always_workflow = "on: [push, pull_request]\njobs:\n  always_job:\n    runs-on: ubuntu-latest\n"
                                "    steps:\n      - run: true\n";
const char* k_src_workflow = "on:\n  push:\n    paths: ['src/**', '!src/**.md']\n  pull_request:\n"
                             "    paths: ['src/**']\njobs:\n  paths_job:\n    runs-on: ubuntu-latest\n"
                             "    steps:\n      - run: true\n";

TEST_CASE("paths filters: a workflow runs only when the push or pull request changed a matching file") {
    const auto dir = tests::make_temp_dir("gate");
    const fs::path origin = dir / "origin";
    const std::string first = tests::make_repo(origin, {{".github/workflows/always.yml", k_always_workflow},
                                                        {".github/workflows/src.yml", k_src_workflow},
                                                        {"README.md", "hello\n"}});
    const std::string docs = tests::commit_file(origin, "docs/guide.md", "docs\n");
    const std::string src_md = tests::commit_file(origin, "src/notes.md", "notes\n");
    const std::string src = tests::commit_file(origin, "src/main.c", "int main;\n");
    const std::string common = "--repo file://" + origin.string() + " --state-dir " + (dir / "state").string() +
                               " --event push --ref main";
    const auto ran = [&](const std::string& report) {
        const std::string text = tests::read_file(dir / report);
        return std::pair{text.find("\"always_job\"") != std::string::npos, text.find("\"paths_job\"") != std::string::npos};
    };

    auto skipped = gate(common + " --sha " + docs + " --base-sha " + first + " --report " + (dir / "docs.json").string());
    INFO(skipped.out);
    CHECK(skipped.code == 0);
    CHECK(ran("docs.json") == std::pair{true, false});
    CHECK_THAT(skipped.out, !Catch::Contains("warning"));

    auto excluded = gate(common + " --sha " + src_md + " --base-sha " + docs + " --report " + (dir / "md.json").string());
    INFO(excluded.out);
    CHECK(excluded.code == 0);
    CHECK(ran("md.json") == std::pair{true, false});  // `!src/**.md` excludes the only change

    auto runs = gate(common + " --sha " + src + " --base-sha " + src_md + " --report " + (dir / "src.json").string());
    INFO(runs.out);
    CHECK(runs.code == 0);
    CHECK(ran("src.json") == std::pair{true, true});

    // A base the repository does not have: the filter is not applied (it runs), with a warning.
    const std::string unknown(40, 'e');
    auto open = gate(common + " --sha " + docs + " --base-sha " + unknown + " --report " + (dir / "open.json").string());
    INFO(open.out);
    CHECK(open.code == 0);
    CHECK(ran("open.json") == std::pair{true, true});
    CHECK_THAT(open.out, Catch::Contains("warning") && Catch::Contains("push") && Catch::Contains(unknown) &&
                             Catch::Contains(docs));

    // A pull request whose base moved on after it branched: the three-dot diff sees only its own files.
    sh("git -C " + origin.string() + " checkout -q -b feature " + docs);
    const std::string feature = tests::commit_file(origin, "docs/more.md", "more\n");
    sh("git -C " + origin.string() + " checkout -q main");
    const std::string pr = common.substr(0, common.find(" --event")) + " --event pull_request --ref feature --base-ref main";
    auto pr_docs = gate(pr + " --sha " + feature + " --base-sha " + src + " --report " + (dir / "pr.json").string());
    INFO(pr_docs.out);
    CHECK(pr_docs.code == 0);
    CHECK(ran("pr.json") == std::pair{true, false});
    // Without --base-sha, or with one the remote lacks, --base-ref's tip is the base: the same.
    for (const std::string& base : {std::string(), " --base-sha " + unknown}) {
        auto by_ref = gate(pr + " --sha " + feature + base + " --report " + (dir / "pr-ref.json").string());
        INFO(by_ref.out);
        CHECK(by_ref.code == 0);
        CHECK(ran("pr-ref.json") == std::pair{true, false});
        CHECK_THAT(by_ref.out, !Catch::Contains("warning"));
    }
    // A new branch (--base-sha all zeros): diffed from its merge base with the remote's default
    // branch (the mirror's HEAD), so only docs/more.md; with src/ changed on it, it runs.
    const std::string branch = common.substr(0, common.find(" --ref")) + " --ref feature --base-sha " + std::string(40, '0');
    auto created = gate(branch + " --sha " + feature + " --report " + (dir / "new.json").string());
    INFO(created.out);
    CHECK(created.code == 0);
    CHECK(ran("new.json") == std::pair{true, false});
    sh("git -C " + origin.string() + " checkout -q feature");
    const std::string feature_src = tests::commit_file(origin, "src/feature.c", "int f;\n");
    sh("git -C " + origin.string() + " checkout -q main");
    auto created_src = gate(branch + " --sha " + feature_src + " --report " + (dir / "new-src.json").string());
    INFO(created_src.out);
    CHECK(created_src.code == 0);
    CHECK(ran("new-src.json") == std::pair{true, true});

    auto bad = gate(pr + " --sha " + feature + " --base-sha nope");
    CHECK(bad.code == 2);
    CHECK_THAT(bad.out, Catch::Contains("--base-sha"));
}

TEST_CASE("merge_group: --base-sha and --base-ref reach github.event.merge_group and its branches filter") {
    const auto dir = tests::make_temp_dir("gate");
    const fs::path origin = dir / "origin";
    const std::string base = tests::make_repo(origin, {{"README.md", "hello\n"}});
    const std::string head = tests::commit_file(
        origin, ".github/workflows/queue.yml",
        "on:\n  merge_group:\n    branches: [release]\njobs:\n  queue_job:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - run: |\n          test '${{ github.event.merge_group.base_sha }}' = " + base +
            "\n          test '${{ github.event.merge_group.base_ref }}' = refs/heads/release\n"
            "          test \"$GITHUB_BASE_REF\" = ''\n");
    const std::string common = "--repo file://" + origin.string() + " --state-dir " + (dir / "state").string() +
                               " --event merge_group --ref refs/heads/gh-readonly-queue/release/pr-1-" + base +
                               " --sha " + head + " --base-sha " + base;
    auto ran = gate(common + " --base-ref release");
    INFO(ran.out);
    CHECK(ran.code == 0);
    CHECK_THAT(ran.out, Catch::Contains("queue_job"));
    // Another base branch: the branches filter leaves nothing to check.
    auto other = gate(common + " --base-ref refs/heads/main");
    INFO(other.out);
    CHECK(other.code == 1);
    CHECK_THAT(other.out, Catch::Contains("no workflow"));
}

TEST_CASE("unknown SHAs, unreachable remotes and bad arguments have their own exit codes") {
    const auto dir = tests::make_temp_dir("gate");
    const Repo repo = make_gate_repo(dir);
    const std::string state = " --state-dir " + (dir / "state").string();
    const std::string unknown(40, 'e');

    auto missing = gate("--repo " + repo.path.string() + " --sha " + unknown + state);
    CHECK(missing.code == 3);
    CHECK_THAT(missing.out, Catch::Contains(unknown));

    auto nowhere = gate("--repo file://" + (dir / "nowhere").string() + " --sha " + repo.good + state);
    CHECK(nowhere.code == 4);
    CHECK_THAT(nowhere.out, Catch::Contains((dir / "nowhere").string()));

    const std::string token = "ghs_GateTokenNeverShown42";
    auto refused = tests::shell("SANDGATE_GIT_TOKEN=" + token + " " + SANDGATE_BINARY + " gate --repo https://127.0.0.1:1/o/r.git --sha " +
                                repo.good + state);
    CHECK(refused.code == 4);
    CHECK_THAT(refused.out, Catch::Contains("127.0.0.1:1") && !Catch::Contains(token));
    CHECK(tests::files_containing(dir / "state", token).empty());

    CHECK(gate("--repo " + repo.path.string() + " --sha abc" + state).code == 2);
    CHECK(gate("--repo " + repo.path.string() + " --sha " + repo.good + " --event release" + state).code == 2);
    CHECK(gate("--sha " + repo.good + state).code == 2);
    auto password = gate("--repo https://u:pa55w0rdXYZ@example.com/o/r --sha " + repo.good + state);
    CHECK(password.code == 2);
    CHECK_THAT(password.out, !Catch::Contains("pa55w0rdXYZ"));
    auto no_job = gate("--repo " + repo.path.string() + " --sha " + repo.good + " -j nosuchjob" + state);
    CHECK(no_job.code == 2);
    CHECK_THAT(no_job.out, Catch::Contains("nosuchjob"));
    auto sandbox = gate("--repo " + repo.path.string() + " --sha " + repo.good + " --sandbox nope" + state);
    CHECK(sandbox.code == 2);
    CHECK_THAT(sandbox.out, Catch::Contains("--sandbox"));
    auto isolation = tests::shell(std::string(SANDGATE_BINARY) + " gate --sandbox off --memory 1G --repo " +
                                  repo.path.string() + " --sha " + repo.good + state);
    CHECK(isolation.code == 2);
    CHECK_THAT(isolation.out, Catch::Contains("--sandbox off"));
    auto nothing = gate("--repo " + repo.path.string() + " --sha " + repo.good + " -W .github/workflows/pr.yml" + state);
    CHECK(nothing.code == 1);  // no workflow runs on merge_group: nothing checked is no pass
}

TEST_CASE("concurrent gates share one mirror") {
    const auto dir = tests::make_temp_dir("gate");
    const Repo repo = make_gate_repo(dir);
    const std::string state = " --state-dir " + (dir / "state").string();
    std::vector<std::future<tests::ShellResult>> runs;
    for (int i = 0; i < 4; ++i) {
        const std::string sha = i % 2 == 0 ? repo.good : repo.bad;
        runs.push_back(std::async(std::launch::async, [=] { return gate("--repo file://" + repo.path.string() + " --sha " + sha + state); }));
    }
    for (int i = 0; i < 4; ++i) {
        auto result = runs[i].get();
        INFO(result.out);
        CHECK(result.code == (i % 2 == 0 ? 0 : 1));
    }
    CHECK(worktree_dirs(dir / "state") == 0);
    int mirrors = 0;  // one repository: one scope (beside the locks and last uses), its mirror whole
    for (const auto& entry : fs::directory_iterator(dir / "state/mirrors"))
        if (entry.path().filename() != "locks" && entry.path().filename() != "last-use") {
            CHECK(tests::shell("git --git-dir=" + (entry.path() / "repo.git").string() + " fsck --no-dangling").code == 0);
            ++mirrors;
        }
    CHECK(mirrors == 1);
}

TEST_CASE("cleanup does not follow a symlink a step planted, and reaps a crashed run's worktrees") {
    const auto dir = tests::make_temp_dir("gate");
    const fs::path outside = dir / "outside";
    tests::write_file(outside / "canary.txt", "keep\n");
    const std::string workflow = std::string(R"(on: merge_group
jobs:
  plant:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: ln -s )") + outside.string() + R"( escape && ln -s / root && mkdir -p deep/er && ln -s )" +
                                 outside.string() + R"(/canary.txt deep/er/file && chmod 000 deep
)";
    const fs::path origin = dir / "origin";
    const std::string sha = tests::make_repo(origin, {{".github/workflows/plant.yml", workflow}});
    // A crashed run's worktree, lease not held.
    jobs::WorktreeArea area(dir / "state");
    const pid_t child = ::fork();
    if (child == 0) {
        auto crashed = area.create("crashed");
        std::_Exit(crashed ? 0 : 1);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    REQUIRE(worktree_dirs(dir / "state") == 1);

    auto result = gate("--repo " + origin.string() + " --sha " + sha + " --state-dir " + (dir / "state").string());
    INFO(result.out);
    CHECK(result.code == 0);
    CHECK(tests::read_file(outside / "canary.txt") == "keep\n");
    CHECK(worktree_dirs(dir / "state") == 0);
}

TEST_CASE("--help documents the exit codes and the token variable") {
    auto help = tests::shell(std::string(SANDGATE_BINARY) + " gate --help");
    CHECK(help.code == 0);
    CHECK_THAT(help.out, Catch::Contains("3 the remote does not have the SHA") && Catch::Contains("SANDGATE_GIT_TOKEN") &&
                             Catch::Contains("--network") && Catch::Contains("--read-only"));
    auto listed = tests::shell(std::string(SANDGATE_BINARY) + " --help");
    CHECK_THAT(listed.out, Catch::Contains("gate"));
}

namespace {

const char* k_reported_workflow = R"YAML(name: ci
on: merge_group
jobs:
  build:
    strategy:
      matrix:
        os: [linux]
    runs-on: ubuntu-latest
    steps:
      - run: echo building on ${{ matrix.os }}
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - name: unit tests
        run: |
          echo "tests of app: $(cat app.txt)"
          echo "::error file=app.txt,line=1,title=broken app::app.txt says $(cat app.txt)"
          exit 3
)YAML";

std::string text(simdjson::dom::element element, const char* field) {
    std::string_view value;
    return element[field].get_string().get(value) == simdjson::SUCCESS ? std::string(value) : "";
}

}  // namespace

TEST_CASE("--github-repo: a check run per job, in_progress at its start and concluded at the end") {
    const auto dir = tests::make_temp_dir("gate");
    const fs::path origin = dir / "origin";
    const std::string sha = tests::make_repo(origin, {{".github/workflows/ci.yml", k_reported_workflow}, {"app.txt", "bad\n"}});
    tests::write_file(dir / "token", std::string(tests::k_fake_token) + "\n");
    tests::FakeGitHub server;
    const std::string command = "--repo " + origin.string() + " --sha " + sha + " --state-dir " + (dir / "state").string() +
                                " --github-repo octo/demo --api-url " + server.url() + " --token-file " +
                                (dir / "token").string() + " --details-url https://ci.example/gate/7";
    auto result = gate(command);
    INFO(result.out);
    CHECK(result.code == 1);  // `test` fails; the reports went through
    CHECK_THAT(result.out, Catch::Contains("ci / test: failure (reported)") &&
                               Catch::Contains("ci / build (linux): success (reported)"));
    CHECK(result.out.find(tests::k_fake_token) == std::string::npos);

    simdjson::dom::parser parser;
    const std::string state = server.state();
    simdjson::dom::array runs = parser.parse(state)["check_runs"].get_array();
    REQUIRE(runs.size() == 2);
    std::map<std::string, simdjson::dom::element> by_name;
    for (auto run : runs) by_name[text(run, "name")] = run;
    REQUIRE(by_name.count("ci / build (linux)") == 1);
    REQUIRE(by_name.count("ci / test") == 1);
    const auto build = by_name["ci / build (linux)"];
    const auto test = by_name["ci / test"];
    CHECK(text(build, "conclusion") == "success");
    CHECK(text(build, "external_id") == R"(ci.yml#build {"os":"linux"})");
    CHECK(text(build, "head_sha") == sha);
    CHECK(text(build, "details_url") == "https://ci.example/gate/7");
    CHECK(text(test, "status") == "completed");
    CHECK(text(test, "conclusion") == "failure");
    CHECK(text(test, "external_id") == "ci.yml#test");
    CHECK_THAT(text(test["output"], "title"), Catch::StartsWith("exit 3"));
    CHECK_THAT(text(test["output"], "summary"), Catch::Contains("unit tests"));
    CHECK_THAT(text(test["output"], "text"), Catch::Contains("unit tests") && Catch::Contains("tests of app: bad"));
    simdjson::dom::array notes = test["annotations"].get_array();
    REQUIRE(notes.size() == 2);  // the step's ::error, and the runner's "exit code 3" (as GitHub's)
    CHECK(text(notes.at(0), "path") == "app.txt");
    CHECK(text(notes.at(0), "annotation_level") == "failure");
    CHECK(text(notes.at(0), "title") == "broken app");
    CHECK(text(notes.at(0), "message") == "app.txt says bad");
    CHECK_THAT(text(notes.at(1), "message"), Catch::Contains("exit code 3"));

    // The bodies GitHub received: each run created in_progress (no conclusion), then one PATCH
    // of that run concluding it. No request carries the token outside its header.
    simdjson::dom::parser request_parser;
    const std::string requests = server.requests();
    std::map<std::string, std::vector<std::string>> bodies;  // target -> bodies, in order
    int creations = 0;
    for (auto request : request_parser.parse(requests)["requests"].get_array()) {
        const std::string target = text(request, "target");
        const std::string body = text(request, "body");
        CHECK(body.find(tests::k_fake_token) == std::string::npos);
        CHECK(target.find(tests::k_fake_token) == std::string::npos);
        if (text(request, "method") == "POST" && target == "/repos/octo/demo/check-runs") {
            ++creations;
            simdjson::dom::parser body_parser;
            auto document = body_parser.parse(body);
            CHECK(text(document.value(), "status") == "in_progress");
            CHECK(document["conclusion"].error() == simdjson::NO_SUCH_FIELD);
            CHECK(text(document.value(), "head_sha") == sha);
        }
        if (text(request, "method") == "PATCH") bodies[target].push_back(body);
    }
    CHECK(creations == 2);
    for (auto run : runs) {
        std::int64_t id = 0;
        REQUIRE(run["id"].get_int64().get(id) == simdjson::SUCCESS);
        const auto& patches = bodies["/repos/octo/demo/check-runs/" + std::to_string(id)];
        REQUIRE(patches.size() == 1);
        CHECK_THAT(patches[0], Catch::Contains("\"conclusion\""));
    }

    // The same gate again updates the same two runs: never a second one.
    auto again = gate(command);
    CHECK(again.code == 1);
    simdjson::dom::parser again_parser;
    const std::string state_again = server.state();
    CHECK(again_parser.parse(state_again)["check_runs"].get_array().size() == 2);
}

TEST_CASE("--github-repo: bad reporting flags are refused before anything runs") {
    const auto dir = tests::make_temp_dir("gate");
    const Repo repo = make_gate_repo(dir);
    const std::string common = "--repo " + repo.path.string() + " --sha " + repo.good + " --state-dir " + (dir / "state").string();
    auto no_credentials = tests::shell("env -u SANDGATE_GITHUB_TOKEN -u GITHUB_TOKEN " + std::string(SANDGATE_BINARY) +
                                       " gate " + common + " --github-repo octo/demo --api-url http://127.0.0.1:1");
    CHECK(no_credentials.code == 2);
    CHECK_THAT(no_credentials.out, Catch::Contains("no GitHub credentials"));
    auto bad_repo = gate(common + " --github-repo octo --token-file " + (dir / "x").string());
    CHECK(bad_repo.code == 2);
    CHECK_THAT(bad_repo.out, Catch::Contains("--github-repo"));
    auto stray = gate(common + " --token-file " + (dir / "x").string());
    CHECK(stray.code == 2);
    CHECK_THAT(stray.out, Catch::Contains("need --github-repo"));
    CHECK(worktree_dirs(dir / "state") == 0);
}

TEST_CASE("--github-repo with a GitHub App and --report-as status: pending, then the verdict, per job") {
    const auto dir = tests::make_temp_dir("gate");
    const fs::path origin = dir / "origin";
    const std::string sha = tests::make_repo(origin, {{".github/workflows/ci.yml", k_reported_workflow}, {"app.txt", "bad\n"}});
    REQUIRE(tests::shell("openssl genrsa -traditional -out " + (dir / "app.pem").string() + " 2048").code == 0);
    const std::string pem = tests::read_file(dir / "app.pem");
    tests::FakeGitHub server(std::vector<std::string>{});  // only the installation's tokens are accepted
    auto result = gate("--repo " + origin.string() + " --sha " + sha + " --state-dir " + (dir / "state").string() +
                       " --github-repo octo/demo --api-url " + server.url() + " --app-id 42 --app-key-file " +
                       (dir / "app.pem").string() + " --installation-id 7 --report-as status --check-name 'gate: {job}'");
    INFO(result.out);
    CHECK(result.code == 1);
    CHECK(result.out.find(pem.substr(40, 40)) == std::string::npos);

    simdjson::dom::parser parser;
    const std::string state = server.state();
    std::map<std::string, std::vector<std::string>> states;  // context -> states, in order
    for (auto status : parser.parse(state)["statuses"].get_array()) {
        CHECK(text(status, "sha") == sha);
        states[text(status, "context")].push_back(text(status, "state"));
    }
    CHECK(states["gate: build (linux)"] == std::vector<std::string>{"pending", "success"});
    CHECK(states["gate: test"] == std::vector<std::string>{"pending", "failure"});
    CHECK(states.size() == 2);
    // Statuses were posted with the installation token the App's JWT was exchanged for.
    simdjson::dom::parser request_parser;
    const std::string requests = server.requests();
    int posted = 0;
    for (auto request : request_parser.parse(requests)["requests"].get_array()) {
        if (text(request, "target").find("/statuses/") == std::string::npos) continue;
        ++posted;
        CHECK_THAT(text(request["headers"], "Authorization"), Catch::StartsWith("Bearer ghs_fake"));
    }
    CHECK(posted == 4);
}

TEST_CASE("--github-repo: a commit whose workflows are invalid still gets a failed run saying why") {
    const auto dir = tests::make_temp_dir("gate");
    const fs::path origin = dir / "origin";
    const std::string valid = tests::make_repo(origin, {{".github/workflows/ci.yml", k_reported_workflow}});
    const std::string sha = tests::commit_file(origin, ".github/workflows/ci.yml", "on: merge_group\njobs:\n  build:\n    steps: 3\n");
    tests::write_file(dir / "token", tests::k_fake_token);
    tests::FakeGitHub server;
    const std::string flags = " --state-dir " + (dir / "state").string() + " --github-repo octo/demo --api-url " + server.url() +
                              " --token-file " + (dir / "token").string();
    const std::string common = "--repo " + origin.string() + " --sha " + sha + flags;
    // The command line's fault, not the commit's: nothing posted.
    auto operator_mistake = gate("--repo " + origin.string() + " --sha " + valid + flags + " -j nosuchjob");
    CHECK(operator_mistake.code == 2);
    simdjson::dom::parser empty_parser;
    const std::string before = server.state();
    CHECK(empty_parser.parse(before)["check_runs"].get_array().size() == 0);

    auto invalid = gate(common);
    INFO(invalid.out);
    CHECK(invalid.code == 2);
    CHECK_THAT(invalid.out, Catch::Contains("ci.yml:4"));
    simdjson::dom::parser parser;
    const std::string state = server.state();
    simdjson::dom::array runs = parser.parse(state)["check_runs"].get_array();
    REQUIRE(runs.size() == 1);
    CHECK(text(runs.at(0), "name") == "sandgate gate / workflows");
    CHECK(text(runs.at(0), "conclusion") == "failure");
    CHECK(text(runs.at(0), "head_sha") == sha);
    CHECK_THAT(text(runs.at(0)["output"], "text"), Catch::Contains("ci.yml:4"));
}

TEST_CASE("--github-repo: SIGTERM cancels the gate's run: step stopped, runs concluded cancelled, exit 143") {
    const auto dir = tests::make_temp_dir("gate");
    const fs::path origin = dir / "origin";
    const std::string marker = tests::unique_marker();
    const std::string sha = tests::make_repo(origin, {{".github/workflows/ci.yml", R"YAML(name: ci
on: merge_group
jobs:
  long:
    runs-on: ubuntu-latest
    steps:
      - run: |
          sh -c 'sleep 600; : )YAML" + marker + R"YAML('
      - if: always()
        run: echo "status=${{ job.status }}"
)YAML"}});
    tests::write_file(dir / "token", tests::k_fake_token);
    tests::FakeGitHub server;
    const fs::path pid_file = dir / "gate.pid";
    fs::create_directories(dir / "tmp");
    auto running = std::async(std::launch::async, [&] {
        return tests::shell("env -u SANDGATE_GIT_TOKEN TMPDIR=" + (dir / "tmp").string() + " " + std::string(SANDGATE_BINARY) +
                            " gate" + sandbox_flag() +
                            " --repo " + origin.string() + " --sha " + sha + " --state-dir " + (dir / "state").string() +
                            " --github-repo octo/demo --api-url " + server.url() + " --token-file " +
                            (dir / "token").string() + " & echo $! > " + pid_file.string() + "; wait $!");
    });
    // Until the run is in_progress and its step runs (a bug hangs here rather than passing).
    bool started = false;
    while (!started && running.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout) {
        simdjson::dom::parser parser;
        const std::string state = server.state();
        for (auto run : parser.parse(state)["check_runs"].get_array()) started = started || text(run, "status") == "in_progress";
        started = started && !tests::processes_with(marker).empty();
    }
    REQUIRE(started);
    const pid_t gate_pid = std::stoi(tests::read_file(pid_file));
    REQUIRE(::kill(gate_pid, SIGTERM) == 0);
    const auto result = running.get();
    INFO(result.out);
    CHECK(result.code == 128 + SIGTERM);
    CHECK_THAT(result.out, Catch::Contains("signal 15: cancelling the run"));
    CHECK_THAT(result.out, Catch::Contains("cancelled by signal 15"));
    CHECK_THAT(result.out, Catch::Contains("status=cancelled"));  // the always() step ran
    CHECK(tests::processes_with(marker).empty());
    simdjson::dom::parser parser;
    const std::string state = server.state();
    simdjson::dom::array runs = parser.parse(state)["check_runs"].get_array();
    REQUIRE(runs.size() == 1);
    CHECK(text(runs.at(0), "name") == "ci / long");
    CHECK(text(runs.at(0), "status") == "completed");
    CHECK(text(runs.at(0), "conclusion") == "cancelled");
    CHECK(worktree_dirs(dir / "state") == 0);  // removed as after any run
    CHECK(fs::is_empty(dir / "tmp"));  // the gate's scratch went with it
}
