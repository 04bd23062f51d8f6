// agent/gate_reporting and `sandgate report`: the run report mapped to check runs, posted to
// the stand-in GitHub by the real binary, journaled while GitHub is down and replayed.

#include <poll.h>
#include <simdjson.h>
#include <spawn.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>

#include "agent/gate_reporting.hpp"
#include "sandbox/fd.hpp"
#include "tests/fake_github/fake_github.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using github::Conclusion;

// A `sandgate run --report` document as jobs/ writes it.
const char* const k_run_report = R"json({
  "event": "pull_request", "exit_code": 1, "duration_ms": 5000,
  "workflows": [{
    "file": ".github/workflows/ci.yml", "name": "CI", "conclusion": "failure",
    "jobs": [
      {"id": "build", "name": "build (linux)", "matrix": {"os": "linux"},
       "outcome": "failure", "conclusion": "failure", "duration_ms": 4000, "outputs": {},
       "annotations": [{"level": "error", "message": "boom", "file": "src/a.c", "line": 3,
                        "col": 5, "title": "compile error"}],
       "steps": [
         {"id": "s1", "name": "Checkout", "stage": "main", "outcome": "success",
          "conclusion": "success", "exit_code": 0, "duration_ms": 100, "stdout_bytes": 10,
          "stderr_bytes": 0, "truncated": false, "timed_out": false, "skip_markers": 0,
          "outputs": {}, "annotations": []},
         {"id": "s2", "name": "Compile", "stage": "main", "outcome": "failure",
          "conclusion": "failure", "exit_code": 2, "duration_ms": 3000,
          "stdout_bytes": 300000, "stderr_bytes": 20, "truncated": true, "timed_out": false,
          "skip_markers": 3, "outputs": {},
          "annotations": [{"level": "error", "message": "boom", "file": "src/a.c", "line": 3,
                           "col": 5, "title": "compile error"},
                          {"level": "warning", "message": "unused", "file": "src/b.c",
                           "line": 7}],
          "message": "Process completed with exit code 2.",
          "steps": [{"id": "in", "name": "inner", "stage": "main", "outcome": "failure",
                     "conclusion": "failure", "exit_code": 2, "duration_ms": 5,
                     "stdout_bytes": 0, "stderr_bytes": 0, "truncated": false,
                     "timed_out": false, "skip_markers": 0, "outputs": {},
                     "annotations": []}]}
       ]},
      {"id": "slow", "name": "slow", "outcome": "failure", "conclusion": "failure",
       "duration_ms": 60000, "outputs": {}, "annotations": [],
       "steps": [{"id": "t", "name": "wait", "stage": "main", "outcome": "failure",
                  "conclusion": "failure", "exit_code": null, "duration_ms": 60000,
                  "stdout_bytes": 0, "stderr_bytes": 0, "truncated": false,
                  "timed_out": true, "skip_markers": 0, "outputs": {}, "annotations": []}]},
      {"id": "call", "name": "call", "outcome": "success", "conclusion": "success",
       "duration_ms": 10, "outputs": {}, "annotations": [], "steps": [],
       "workflow_call": "./.github/workflows/lib.yml",
       "jobs": [{"id": "lint", "name": "lint", "outcome": "success", "conclusion": "success",
                 "duration_ms": 10, "outputs": {}, "annotations": [], "steps": []}]}
    ]}]})json";

constexpr const char* k_sha = "0123456789abcdef0123456789abcdef01234567";

struct Ran {
    int status = -1;
    std::string out;
    std::string err;
};

// Runs the sandgate binary with exactly `env` (plus PATH), capturing both streams.
using Environment = std::vector<std::pair<std::string, std::string>>;

Ran run_sandgate(std::vector<std::string> args, Environment env = {}) {
    std::vector<std::string> argv = {SANDGATE_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    env.emplace_back("PATH", "/usr/bin:/bin");
    std::vector<std::string> env_lines;
    for (const auto& [name, value] : env) env_lines.push_back(name + "=" + value);
    std::vector<char*> raw_argv, raw_env;
    for (auto& arg : argv) raw_argv.push_back(arg.data());
    raw_argv.push_back(nullptr);
    for (auto& line : env_lines) raw_env.push_back(line.data());
    raw_env.push_back(nullptr);
    int out_pipe[2], err_pipe[2];
    REQUIRE(::pipe2(out_pipe, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(err_pipe, O_CLOEXEC) == 0);
    sandbox::Fd out_read(out_pipe[0]), out_write(out_pipe[1]);
    sandbox::Fd err_read(err_pipe[0]), err_write(err_pipe[1]);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out_write.get(), STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err_write.get(), STDERR_FILENO);
    pid_t pid = -1;
    const int rc =
        ::posix_spawn(&pid, raw_argv[0], &actions, nullptr, raw_argv.data(), raw_env.data());
    posix_spawn_file_actions_destroy(&actions);
    REQUIRE(rc == 0);
    out_write.reset();
    err_write.reset();
    Ran ran;
    pollfd fds[2] = {{out_read.get(), POLLIN, 0}, {err_read.get(), POLLIN, 0}};
    std::string* sinks[2] = {&ran.out, &ran.err};
    int open_streams = 2;
    while (open_streams > 0 && ::poll(fds, 2, 300'000) > 0) {
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || fds[i].revents == 0) continue;
            char buffer[4096];
            const ssize_t got = ::read(fds[i].fd, buffer, sizeof buffer);
            if (got > 0) {
                sinks[i]->append(buffer, static_cast<size_t>(got));
            } else {
                fds[i].fd = -1;
                --open_streams;
            }
        }
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    ran.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return ran;
}

std::vector<std::string> common_args(const std::string& url, const std::filesystem::path& dir) {
    return {"report",
            "--github-repo",
            "octo/demo",
            "--api-url",
            url,
            "--token-file",
            (dir / "token").string(),
            "--state-dir",
            (dir / "state").string()};
}

}  // namespace

TEST_CASE("a run report maps to one completed JobReport per job") {
    auto jobs = agent::job_reports_from_run_report(k_run_report, k_sha);
    REQUIRE(jobs.has_value());
    REQUIRE(jobs->size() == 3);
    const auto& build = (*jobs)[0];
    CHECK(build.workflow == "CI");
    CHECK(build.job == "build (linux)");
    CHECK(build.job_key == R"(ci.yml#build {"os":"linux"})");
    CHECK(build.sha == k_sha);
    CHECK(build.conclusion == Conclusion::failure);
    CHECK(build.exit_code == 2);
    CHECK(build.failing_step == "Compile");
    CHECK(build.log_tail == "Process completed with exit code 2.");
    REQUIRE(build.steps.size() == 3);
    CHECK(build.steps[2].name == "Compile / inner");
    CHECK(build.steps[1].stdout_truncated);
    CHECK_FALSE(build.steps[1].stderr_truncated);
    CHECK(build.steps[1].skip_markers == 3);
    REQUIRE(build.annotations.size() == 2);  // the job-level copy of "boom" is merged
    CHECK(build.annotations[0].start_column == 5);
    CHECK(build.annotations[1].level == github::AnnotationLevel::warning);
    CHECK((*jobs)[1].conclusion == Conclusion::timed_out);
    CHECK((*jobs)[2].job == "call / lint");
    CHECK((*jobs)[2].job_key == "ci.yml#call/lint");

    auto bad = agent::job_reports_from_run_report(R"({"workflow": []})", k_sha);
    REQUIRE_FALSE(bad.has_value());
    CHECK_THAT(bad.error().message, Catch::Contains("`workflows`"));
}

TEST_CASE("sandgate report posts the runs with a token from a file, never echoing it") {
    auto dir = tests::make_temp_dir("report");
    tests::write_file(dir / "token", std::string(tests::k_fake_token) + "\n");
    tests::write_file(dir / "run.json", k_run_report);
    tests::FakeGitHub server;
    auto args = common_args(server.url(), dir);
    args.insert(args.end(), {"--from-report", (dir / "run.json").string(), "--sha", k_sha,
                             "--details-url", "https://ci.example/gate/7"});
    Ran ran = run_sandgate(args);
    INFO(ran.err);
    CHECK(ran.status == 0);
    CHECK_THAT(ran.out, Catch::Contains("CI / build (linux): failure (reported)"));
    CHECK(ran.out.find(tests::k_fake_token) == std::string::npos);
    CHECK(ran.err.find(tests::k_fake_token) == std::string::npos);

    simdjson::dom::parser parser;
    const std::string state = server.state();
    auto runs = parser.parse(state)["check_runs"].get_array();
    REQUIRE(runs.size() == 3);
    auto build = runs.at(0);
    CHECK(std::string_view(build["name"].get_string()) == "CI / build (linux)");
    CHECK(std::string_view(build["conclusion"].get_string()) == "failure");
    CHECK(std::string_view(build["output"]["title"].get_string()) ==
          "exit 2 · stdout truncated · 3 skipped under wrap");
    CHECK(std::string_view(build["details_url"].get_string()) == "https://ci.example/gate/7");
    CHECK(build["annotations"].get_array().size() == 2);
    CHECK(std::string_view(runs.at(1)["conclusion"].get_string()) == "timed_out");

    // Reporting the same report again updates the same runs.
    CHECK(run_sandgate(args).status == 0);
    const std::string again = server.state();
    simdjson::dom::parser parser2;
    CHECK(parser2.parse(again)["check_runs"].get_array().size() == 3);
}

TEST_CASE("sandgate report keeps reports while GitHub is down and replays them") {
    auto dir = tests::make_temp_dir("report");
    tests::write_file(dir / "token", tests::k_fake_token);
    tests::write_file(dir / "run.json", k_run_report);
    int port = 0;
    std::string url;
    {
        tests::FakeGitHub gone;
        port = gone.port();
        url = gone.url();
    }
    auto args = common_args(url, dir);
    auto with_report = args;
    with_report.insert(with_report.end(), {"--from-report", (dir / "run.json").string(), "--sha",
                                           k_sha, "--report-as", "status"});
    Ran down = run_sandgate(with_report);
    CHECK(down.status == agent::k_exit_report_journaled);
    CHECK_THAT(down.out, Catch::Contains("kept in the journal for later"));

    tests::FakeGitHub server(std::vector<std::string>{tests::k_fake_token}, port);
    auto replay = args;
    replay.insert(replay.end(), {"--replay-only", "--report-as", "status"});
    Ran up = run_sandgate(replay);
    INFO(up.err);
    CHECK(up.status == 0);
    CHECK_THAT(up.out, Catch::Contains("journal: 3 sent"));
    simdjson::dom::parser parser;
    const std::string state = server.state();
    auto statuses = parser.parse(state)["statuses"].get_array();
    REQUIRE(statuses.size() == 3);
    CHECK(std::string_view(statuses.at(0)["state"].get_string()) == "failure");
    CHECK(std::string_view(statuses.at(2)["state"].get_string()) == "success");
}

TEST_CASE("sandgate report refuses bad arguments with exit 2 and a clear message") {
    auto dir = tests::make_temp_dir("report");
    tests::write_file(dir / "run.json", k_run_report);
    Ran no_creds = run_sandgate({"report", "--github-repo", "octo/demo", "--from-report",
                                 (dir / "run.json").string(), "--sha", k_sha, "--state-dir",
                                 (dir / "state").string()});
    CHECK(no_creds.status == 2);
    CHECK_THAT(no_creds.err, Catch::Contains("no GitHub credentials"));
    Ran bad_repo =
        run_sandgate({"report", "--github-repo", "octo", "--replay-only"}, {{"GITHUB_TOKEN", "x"}});
    CHECK(bad_repo.status == 2);
    CHECK_THAT(bad_repo.err, Catch::Contains("--github-repo: expected OWNER/NAME"));
    Ran both = run_sandgate(
        {"report", "--github-repo", "o/r", "--replay-only", "--token-file", "t", "--app-id", "1"});
    CHECK(both.status == 2);
    CHECK_THAT(both.err, Catch::Contains("exclude each other"));
    Ran bad_file = run_sandgate({"report", "--github-repo", "o/r", "--from-report",
                                 (dir / "missing.json").string(), "--sha", k_sha});
    CHECK(bad_file.status == 2);
    CHECK_THAT(bad_file.err, Catch::Contains("missing.json: cannot be read"));
}
