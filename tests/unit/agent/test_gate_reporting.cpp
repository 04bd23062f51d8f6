// agent/gate_reporting and `sandgate report`: the run report mapped to check runs, posted to
// the stand-in GitHub by the real binary, journaled while GitHub is down and replayed.

#include <poll.h>
#include <simdjson.h>
#include <spawn.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>

#include "agent/gate/gate_reporting.hpp"
#include "common/fd.hpp"
#include "tests/fake_github/fake_github.hpp"
#include "tests/helpers/git_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

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
    common::Fd out_read(out_pipe[0]), out_write(out_pipe[1]);
    common::Fd err_read(err_pipe[0]), err_write(err_pipe[1]);
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

// The retry policy of these tests: the client's own loop, with milliseconds for its seconds.
github::ClientOptions fast_retries() {
    github::ClientOptions options;
    options.max_attempts = 3;
    options.backoff_initial = std::chrono::milliseconds(5);
    options.backoff_cap = std::chrono::milliseconds(20);
    options.connect_timeout = std::chrono::milliseconds(2'000);
    options.request_timeout = std::chrono::milliseconds(10'000);
    return options;
}

// A FILE* whose text the test reads back.
class Captured {
public:
    Captured() : m_file(::open_memstream(&m_buffer, &m_size)) { REQUIRE(m_file != nullptr); }
    Captured(const Captured&) = delete;
    Captured& operator=(const Captured&) = delete;
    ~Captured() {
        std::fclose(m_file);
        std::free(m_buffer);
    }
    std::FILE* file() const { return m_file; }
    std::string text() const {
        std::fflush(m_file);
        return std::string(m_buffer, m_size);
    }

private:
    char* m_buffer = nullptr;
    std::size_t m_size = 0;
    std::FILE* m_file;
};

// A port where GitHub was a moment ago: connections to it are refused.
std::pair<int, std::string> dead_github() {
    tests::FakeGitHub gone;
    return {gone.port(), gone.url()};
}

// The reporting flags of these tests: octo/demo at `url`, the token file and state in `dir`.
agent::GitHubFlags flags_for(const std::string& url, const std::filesystem::path& dir) {
    agent::GitHubFlags flags;
    flags.repo = "octo/demo";
    flags.api_url = url;
    flags.token_file = (dir / "token").string();
    flags.state_dir = (dir / "state").string();
    return flags;
}

int journal_entries(const std::filesystem::path& state) {
    int count = 0;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(state / "github-journal", ec))
        count += entry.path().extension() == ".json" ? 1 : 0;
    return count;
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
    const auto [port, url] = dead_github();
    // GitHub is down: `sandgate report`'s own path (the flags, the reporter, the delivery of
    // each job) with a short retry policy in place of the minutes the defaults would wait.
    agent::GitHubFlags flags = flags_for(url, dir);
    flags.report_as = "status";
    auto jobs = agent::job_reports_from_run_report(k_run_report, k_sha);
    REQUIRE(jobs.has_value());
    // In a process of its own that then exits, as `sandgate report` would: the journal's
    // entries belong to a process that is gone, so the next `sandgate report` sends them.
    const std::filesystem::path out_file = dir / "out.txt";
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        std::FILE* out = std::fopen(out_file.c_str(), "w");
        auto reporter = agent::make_reporter(flags, fast_retries());
        if (out == nullptr || !reporter) std::_Exit(100);
        const agent::ReportOutput output{out, stderr, "sandgate report"};
        const int replayed = agent::replay_journal(*reporter, output);
        const int delivered = agent::deliver_reports(*reporter, *jobs, output);
        std::fclose(out);
        std::_Exit(std::max(replayed, delivered));
    }
    int wait_status = 0;
    REQUIRE(::waitpid(child, &wait_status, 0) == child);
    REQUIRE(WIFEXITED(wait_status));
    CHECK(WEXITSTATUS(wait_status) == agent::k_exit_report_journaled);
    CHECK_THAT(tests::read_file(out_file),
               Catch::Contains("CI / build (linux): failure (kept in the journal for later)"));
    CHECK(journal_entries(dir / "state") == 3);

    tests::FakeGitHub server(std::vector<std::string>{tests::k_fake_token}, port);
    auto replay = common_args(url, dir);
    replay.insert(replay.end(), {"--replay-only", "--report-as", "status"});
    Ran up = run_sandgate(replay);
    INFO(up.err);
    CHECK(up.status == 0);
    CHECK_THAT(up.out, Catch::Contains("journal: 3 sent"));
    CHECK(journal_entries(dir / "state") == 0);
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

TEST_CASE("job_key matches the keys of the run report") {
    CHECK(agent::job_key(".github/workflows/ci.yml", "build", R"({"os":"linux"})") ==
          R"(ci.yml#build {"os":"linux"})");
    CHECK(agent::job_key("ci.yml", "slow", "") == "ci.yml#slow");
}

TEST_CASE("the gate's reporter: runs started while GitHub is down are journaled, then concluded") {
    auto dir = tests::make_temp_dir("report");
    tests::write_file(dir / "token", tests::k_fake_token);
    auto workflow = jobs::parse_workflow(R"(name: CI
on: push
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - run: "true"
)",
                                         ".github/workflows/ci.yml");
    REQUIRE(workflow.has_value());
    const auto [port, url] = dead_github();
    const agent::GitHubFlags flags = flags_for(url, dir);
    jobs::Masker masker;
    jobs::JobReport job;
    job.id = "build";
    job.name = "build";
    job.conclusion = job.outcome = jobs::Outcome::success;
    jobs::RunReport run;
    run.workflows.push_back(
        jobs::WorkflowReport{".github/workflows/ci.yml", "CI", jobs::Outcome::success, {job}});
    Captured out, err;
    {
        auto reporter = agent::make_reporter(flags, fast_retries());
        REQUIRE(reporter.has_value());
        agent::GateReporter gate(*reporter, k_sha, masker, {&*workflow},
                                 agent::ReportOutput{out.file(), err.file(), "sandgate gate"});
        gate.job_started(*workflow, job);
        CHECK_THAT(err.text(),
                   Catch::Contains("CI / build: in_progress kept in the journal for later"));
        CHECK(gate.finish(run) == agent::k_exit_report_journaled);
        CHECK_THAT(out.text(),
                   Catch::Contains("CI / build: success (kept in the journal for later)"));
        CHECK(journal_entries(dir / "state") == 1);
    }
    tests::FakeGitHub server(std::vector<std::string>{tests::k_fake_token}, port);
    auto reporter = agent::make_reporter(flags, fast_retries());
    REQUIRE(reporter.has_value());
    agent::GateReporter gate(*reporter, k_sha, masker, {&*workflow},
                             agent::ReportOutput{out.file(), err.file(), "sandgate gate"});
    CHECK(gate.replay() == agent::k_exit_reported);
    CHECK(journal_entries(dir / "state") == 0);
    simdjson::dom::parser parser;
    const std::string state = server.state();
    auto runs = parser.parse(state)["check_runs"].get_array();
    REQUIRE(runs.size() == 1);
    CHECK(std::string_view(runs.at(0)["name"].get_string()) == "CI / build");
    CHECK(std::string_view(runs.at(0)["external_id"].get_string()) == "ci.yml#build");
    CHECK(std::string_view(runs.at(0)["conclusion"].get_string()) == "success");
}

TEST_CASE("the gate's git token: minted apart, for the gated repository alone, contents:read") {
    auto dir = tests::make_temp_dir("git-token");
    const std::string key = (dir / "app.pem").string();
    REQUIRE(std::system(
                ("openssl genrsa -traditional -out " + key + " 2048 2>/dev/null").c_str()) == 0);
    tests::FakeGitHub server(std::vector<std::string>{});
    agent::GitHubFlags flags = flags_for(server.url(), dir);
    CHECK(agent::git_token_source(flags).value() == nullptr);  // a token file: nothing to mint

    flags.token_file.clear();
    flags.app_id = "42";
    flags.app_key = key;
    flags.installation_id = "7";
    auto source = agent::git_token_source(flags);
    REQUIRE(source.has_value());
    REQUIRE(*source != nullptr);
    CHECK((*source)->token().value().starts_with("ghs_fake"));

    // The gate mints it before fetching an https --repo, and says nothing of it.
    Ran ran = run_sandgate({"gate", "--repo", "https://127.0.0.1:1/octo/demo.git", "--sha",
                            std::string(40, 'a'), "--state-dir", (dir / "state").string(),
                            "--github-repo", "octo/demo", "--api-url", server.url(), "--app-id",
                            "42", "--app-key-file", key, "--installation-id", "7"});
    INFO(ran.err);
    CHECK(ran.status == 4);  // the remote is unreachable
    CHECK_THAT(ran.err, Catch::Contains("127.0.0.1:1") && !Catch::Contains("ghs_"));
    simdjson::dom::parser parser;
    const std::string state = server.state();
    int scoped = 0;
    for (auto issued : parser.parse(state)["issued_tokens"].get_array()) {
        CHECK(simdjson::to_string(issued["request"]) ==
              R"({"repositories":["demo"],"permissions":{"contents":"read"}})");
        ++scoped;
    }
    CHECK(scoped == 2);  // git_token_source's above and the gate's (the gate reported nothing)

    // A bad installation id is a flag error, before anything is fetched.
    auto bad = run_sandgate({"gate", "--repo", "https://127.0.0.1:1/octo/demo.git", "--sha",
                             std::string(40, 'a'), "--state-dir", (dir / "state").string(),
                             "--github-repo", "octo/demo", "--api-url", server.url(), "--app-id",
                             "42", "--app-key-file", key, "--installation-id", "x"});
    CHECK(bad.status == 2);
    CHECK_THAT(bad.err, Catch::Contains("--installation-id"));
}

TEST_CASE("a gate outliving its tokens: the late checkout and check runs get fresh ones") {
    SKIP_UNDER_WRAP("python3's TLS server and openssl need the host's /usr/lib and a free port");
    auto dir = tests::make_temp_dir("gate-refresh");
    const std::string key = (dir / "app.pem").string(), cert = (dir / "cert.pem").string();
    REQUIRE(
        std::system(
            ("openssl genrsa -traditional -out " + key +
             " 2048 2>/dev/null && openssl req -x509 -newkey rsa:2048 "
             "-nodes -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost -keyout " +
             (dir / "key.pem").string() + " -out " + cert + " 2>/dev/null")
                .c_str()) == 0);
    tests::FakeGitHub server(std::vector<std::string>{}, 0,
                             {"--git-root", (dir / "served").string(), "--cert", cert, "--key",
                              (dir / "key.pem").string()});
    const std::string https = server.url();
    // The late commit sits on a ref no mirror fetches until the first job's step (standing in for
    // an hour of work: it moves GitHub's clock past every token's expiry) puts it on a branch.
    const auto work = dir / "work", served = dir / "served/octo/demo.git";
    tests::make_repo(work, {{"a.txt", "one\n"}});
    const std::string git = "git -C " + work.string() + " ";
    tests::sh(git + "checkout -q -b side");
    const std::string late = tests::commit_file(work, "late.txt", "late\n");
    tests::sh(git + "checkout -q -");
    const std::string sha = tests::commit_file(work, ".github/workflows/ci.yml",
                                               R"(name: CI
on: push
jobs:
  first:
    runs-on: ubuntu-latest
    steps:
      - run: git --git-dir=)" + served.string() + " update-ref refs/heads/late " +
                                                   late + R"(
      - run: curl -sf --cacert )" + cert + R"( -d '{"advance_clock":3700}' )" +
                                                   https + R"(/_control/config
  second:
    needs: first
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          ref: )" + late + R"(
      - run: test -f late.txt
)");
    tests::sh("git init -q --bare " + served.string());
    tests::sh(git + "push -q " + served.string() + " HEAD:refs/heads/main side:refs/hidden/late");
    tests::sh(git + "branch -q -D side");

    Ran ran = run_sandgate({"gate",
                            "--repo",
                            https + "/octo/demo.git",
                            "--sha",
                            sha,
                            "--event",
                            "push",
                            "--sandbox",
                            "off",
                            "--state-dir",
                            (dir / "state").string(),
                            "--github-repo",
                            "octo/demo",
                            "--api-url",
                            https,
                            "--app-id",
                            "42",
                            "--app-key-file",
                            key,
                            "--installation-id",
                            "7"},
                           {{"SSL_CERT_FILE", cert}, {"HOME", dir.string()}});
    INFO(ran.out + ran.err);
    CHECK(ran.status == 0);
    CHECK_THAT(ran.out + ran.err, !Catch::Contains("ghs_"));
    simdjson::dom::parser parser;
    const std::string state = server.state();
    int git_tokens = 0, report_tokens = 0;
    for (auto issued : parser.parse(state)["issued_tokens"].get_array())
        (issued["repositories"].is_null() ? report_tokens : git_tokens) += 1;
    CHECK(git_tokens == 2);     // at the start, and again when the late fetch was refused
    CHECK(report_tokens == 2);  // likewise for the check runs
    auto runs = parser.parse(state)["check_runs"].get_array();
    REQUIRE(runs.size() == 2);
    for (auto run : runs) CHECK(std::string_view(run["conclusion"].get_string()) == "success");
    int refused_git = 0, refused_api = 0;
    simdjson::dom::parser requests_parser;
    const std::string requests = server.requests();
    for (auto request : requests_parser.parse(requests)["requests"].get_array()) {
        if (request["status"].is_int64() && request["status"].get_int64().value() == 401) {
            const std::string_view target = request["target"].get_string();
            (target.starts_with("/octo/demo.git/") ? refused_git : refused_api) += 1;
        }
    }
    CHECK(refused_api >= 1);  // the first job's conclusion, sent with the expired token
    CHECK(refused_git >= 2);  // libgit2 asks without credentials first, then with the expired token
}
