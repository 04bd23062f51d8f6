// sandgate gate --github-repo end to end (agent/gate/cmd_gate.cpp with
// agent/gate/gate_reporting.cpp): the real binary against the fake GitHub, a check run or a commit
// status per job, bad reporting flags refused before anything runs, invalid workflows reported, and
// a cancelled gate concluded cancelled. The gate without GitHub is tested in test_gate.cpp.
#include <signal.h>
#include <simdjson.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <future>
#include <map>
#include <string>
#include <vector>

#include "tests/fake_github/fake_github.hpp"
#include "tests/helpers/git_fixture.hpp"
#include "tests/support/gate_cli.hpp"
#include "tests/support/numbers.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace fs = std::filesystem;
using namespace tests::gate_cli;

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
    const std::string sha = tests::make_repo(
        origin, {{".github/workflows/ci.yml", k_reported_workflow}, {"app.txt", "bad\n"}});
    tests::write_file(dir / "token", std::string(tests::k_fake_token) + "\n");
    tests::FakeGitHub server;
    const std::string command = "--repo " + origin.string() + " --sha " + sha + " --state-dir " +
                                (dir / "state").string() + " --github-repo octo/demo --api-url " +
                                server.url() + " --token-file " + (dir / "token").string() +
                                " --details-url https://ci.example/gate/7";
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
    CHECK_THAT(text(test["output"], "text"),
               Catch::Contains("unit tests") && Catch::Contains("tests of app: bad"));
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
    const std::string common = "--repo " + repo.path.string() + " --sha " + repo.good +
                               " --state-dir " + (dir / "state").string();
    auto no_credentials = tests::shell("env -u SANDGATE_GITHUB_TOKEN -u GITHUB_TOKEN " +
                                       std::string(SANDGATE_BINARY) + " gate " + common +
                                       " --github-repo octo/demo --api-url http://127.0.0.1:1");
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

TEST_CASE(
    "--github-repo with a GitHub App and --report-as status: pending, then the verdict, per job") {
    const auto dir = tests::make_temp_dir("gate");
    const fs::path origin = dir / "origin";
    const std::string sha = tests::make_repo(
        origin, {{".github/workflows/ci.yml", k_reported_workflow}, {"app.txt", "bad\n"}});
    REQUIRE(tests::shell("openssl genrsa -traditional -out " + (dir / "app.pem").string() + " 2048")
                .code == 0);
    const std::string pem = tests::read_file(dir / "app.pem");
    tests::FakeGitHub server(
        std::vector<std::string>{});  // only the installation's tokens are accepted
    auto result = gate("--repo " + origin.string() + " --sha " + sha + " --state-dir " +
                       (dir / "state").string() + " --github-repo octo/demo --api-url " +
                       server.url() + " --app-id 42 --app-key-file " + (dir / "app.pem").string() +
                       " --installation-id 7 --report-as status --check-name 'gate: {job}'");
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

TEST_CASE(
    "--github-repo: a commit whose workflows are invalid still gets a failed run saying why") {
    const auto dir = tests::make_temp_dir("gate");
    const fs::path origin = dir / "origin";
    const std::string valid =
        tests::make_repo(origin, {{".github/workflows/ci.yml", k_reported_workflow}});
    const std::string sha = tests::commit_file(origin, ".github/workflows/ci.yml",
                                               "on: merge_group\njobs:\n  build:\n    steps: 3\n");
    tests::write_file(dir / "token", tests::k_fake_token);
    tests::FakeGitHub server;
    const std::string flags = " --state-dir " + (dir / "state").string() +
                              " --github-repo octo/demo --api-url " + server.url() +
                              " --token-file " + (dir / "token").string();
    const std::string common = "--repo " + origin.string() + " --sha " + sha + flags;
    // The command line's fault, not the commit's: nothing posted.
    auto operator_mistake =
        gate("--repo " + origin.string() + " --sha " + valid + flags + " -j nosuchjob");
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

TEST_CASE(
    "--github-repo: SIGTERM cancels the gate's run: step stopped, runs concluded cancelled, exit "
    "143") {
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
        return tests::shell("env -u SANDGATE_GIT_TOKEN TMPDIR=" + (dir / "tmp").string() + " " +
                            std::string(SANDGATE_BINARY) + " gate" + sandbox_flag() + " --repo " +
                            origin.string() + " --sha " + sha + " --state-dir " +
                            (dir / "state").string() + " --github-repo octo/demo --api-url " +
                            server.url() + " --token-file " + (dir / "token").string() +
                            " & echo $! > " + pid_file.string() + "; wait $!");
    });
    // Until the run is in_progress and its step runs (a bug hangs here rather than passing).
    bool started = false;
    while (!started &&
           running.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout) {
        simdjson::dom::parser parser;
        const std::string state = server.state();
        for (auto run : parser.parse(state)["check_runs"].get_array())
            started = started || text(run, "status") == "in_progress";
        started = started && !tests::processes_with(marker).empty();
    }
    REQUIRE(started);
    const pid_t gate_pid = tests::to_number<pid_t>(tests::read_file(pid_file)).value_or(-1);
    REQUIRE(gate_pid > 0);
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
    CHECK(fs::is_empty(dir / "tmp"));          // the gate's scratch went with it
}
