// The nightly dogfood path: .sandgate/dogfood.yml run by `sandgate run` (ctest inside the wrap,
// the skip markers printed by the step) and its report posted by `sandgate report` as a check
// run whose title carries the skip-marker count. The fixture is a real ctest build directory
// with a passing test, a test that prints a skip marker and, in one case, a failing test.
#include <simdjson.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "sandbox/process/run.hpp"
#include "tests/fake_github/fake_github.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace {

constexpr const char* k_sha = "0123456789abcdef0123456789abcdef01234567";

// Runs the sandgate binary unwrapped (it wraps its own steps) in `cwd`, with a HOME of its own
// outside the workspace (a workspace inside HOME would be refused).
sandbox::RunResult sandgate(const std::vector<std::string>& args,
                            const std::filesystem::path& cwd) {
    const auto home = cwd.parent_path() / (cwd.filename().string() + "-home");
    std::filesystem::create_directories(home);
    sandbox::RunRequest request;
    request.argv = {SANDGATE_BINARY};
    request.argv.insert(request.argv.end(), args.begin(), args.end());
    request.cwd = cwd;
    request.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
                   {"HOME", home.string()},
                   {"SANDGATE_GITHUB_TOKEN", tests::k_fake_token}};
    request.policy.mode = sandbox::SandboxMode::off;  // sandgate wraps its own steps
    request.timeout = std::chrono::minutes(5);
    auto result = sandbox::run(request);
    std::filesystem::remove_all(home);
    return result;
}

// A repository holding the project's dogfood workflow and a configured ctest build dir.
std::filesystem::path make_fixture(bool with_failure) {
    const auto repo = tests::make_temp_dir("nightly");
    std::filesystem::create_directories(repo / ".sandgate");
    std::filesystem::copy_file(std::filesystem::path(SANDGATE_SOURCE_DIR) / ".sandgate/dogfood.yml",
                               repo / ".sandgate/dogfood.yml");
    std::filesystem::create_directories(repo / "build");
    // The marker is printed by a script, so that it is not also in ctest's logged command line.
    tests::write_file(repo / "build/skip.sh", "echo 'SKIP-UNDER-WRAP(needs a writable cgroup)'\n");
    std::string tests_file = "add_test(passes /bin/true)\nadd_test(skips /bin/sh skip.sh)\n";
    if (with_failure) tests_file += "add_test(fails /bin/false)\n";
    tests::write_file(repo / "build/CTestTestfile.cmake", tests_file);
    return repo;
}

struct Outcome {
    int run_status = -1;
    std::string conclusion;
    std::string title;
    std::string name;
};

Outcome run_and_report(const std::filesystem::path& repo) {
    Outcome outcome;
    const auto report = repo / "dogfood.json";
    std::vector<std::string> args = {
        "run", "-W", ".sandgate/dogfood.yml", "--report", report.string(), "workflow_dispatch"};
    // Inside the dogfood run no nested user namespace can be had: the outer wrap is the sandbox.
    if (tests::under_wrap()) args.insert(args.begin() + 1, {"--sandbox", "off"});
    auto ran = sandgate(args, repo);
    INFO(ran.out.head << ran.err.head);
    outcome.run_status = ran.exit_status();
    REQUIRE(std::filesystem::exists(report));

    tests::FakeGitHub server;
    auto posted = sandgate({"report", "--github-repo", "octo/sandgate", "--api-url", server.url(),
                            "--sha", k_sha, "--from-report", report.string(), "--check-name",
                            "nightly / {job}", "--state-dir", (repo / "state").string()},
                           repo);
    INFO(posted.out.head << posted.err.head);
    REQUIRE(posted.exit_status() == 0);
    simdjson::dom::parser parser;
    const std::string state = server.state();
    auto runs = parser.parse(state)["check_runs"].get_array();
    REQUIRE(runs.size() == 1);
    auto run = runs.at(0);
    outcome.conclusion = std::string(run["conclusion"].get_string().value());
    outcome.title = std::string(run["output"]["title"].get_string().value());
    outcome.name = std::string(run["name"].get_string().value());
    return outcome;
}

}  // namespace

TEST_CASE("the dogfood workflow is valid and selected by the nightly's event") {
    const auto repo = make_fixture(false);
    auto listed = sandgate({"run", "-l", "-W", ".sandgate/dogfood.yml", "workflow_dispatch"}, repo);
    INFO(listed.err.head);
    CHECK(listed.exit_status() == 0);
    CHECK_THAT(listed.out.head, Catch::Contains("suite-in-wrap"));
}

TEST_CASE("a green suite inside the wrap reports success with its skip-marker count") {
    const Outcome outcome = run_and_report(make_fixture(false));
    CHECK(outcome.run_status == 0);
    CHECK(outcome.conclusion == "success");
    CHECK(outcome.name == "nightly / suite inside the wrap");
    CHECK_THAT(outcome.title, Catch::Contains("1 skipped under wrap"));
}

TEST_CASE("a failing test fails the nightly and its check run") {
    const Outcome outcome = run_and_report(make_fixture(true));
    CHECK(outcome.run_status == 1);
    CHECK(outcome.conclusion == "failure");
    CHECK_THAT(outcome.title, Catch::Contains("exit 8"));
    CHECK_THAT(outcome.title, Catch::Contains("1 skipped under wrap"));
}
