// fail-fast with real processes: when one matrix leg fails, the legs still running are
// cancelled through the sandbox (their process trees stopped, conclusion `cancelled`), the
// legs not started yet are cancelled without running, and fail-fast: false lets them finish.
// A signal to `sandgate run` cancels the whole run the same way.
// The sleeping leg sleeps 600 s: a cancel that does not work hangs the test (ctest's timeout)
// rather than passing it.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <thread>

#include "jobs/expr/value.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/run_helpers.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace {

const jobs::Value& leg(const jobs::Value& report, std::size_t index) {
    return report.get("workflows")->as_array().at(0).get("jobs")->as_array().at(index);
}

std::string text(const jobs::Value& value, std::string_view key) {
    const jobs::Value* field = value.get(key);
    return field ? field->to_display_string() : "<missing>";
}

// Leg `fail` waits until leg `sleep` is running, then fails; `sleep` would sleep 600 s;
// `later` can only start after one of them ends (max-parallel 2).
constexpr std::string_view k_workflow = R"(on: push
jobs:
  m:
    runs-on: ubuntu-latest
    strategy:
      max-parallel: 2
      fail-fast: FAIL_FAST
      matrix:
        role: [sleep, fail, later]
    steps:
      - name: work
        run: |
          case "${{ matrix.role }}" in
            sleep) touch sleeping; echo sleeping-now; sleep SLEEP_SECONDS; touch slept ;;
            fail) while [ ! -e sleeping ]; do sleep 0.05; done; echo failing-now; exit 1 ;;
            later) touch later-ran ;;
          esac
      - name: after
        run: touch "after-${{ matrix.role }}"
      - name: cleanup
        if: always()
        run: echo "status=${{ job.status }}" > "always-${{ matrix.role }}"
)";

std::string workflow(std::string_view fail_fast, std::string_view sleep_seconds) {
    std::string text(k_workflow);
    text.replace(text.find("FAIL_FAST"), 9, fail_fast);
    text.replace(text.find("SLEEP_SECONDS"), 13, sleep_seconds);
    return text;
}

}  // namespace

TEST_CASE("fail-fast cancels the running leg through the sandbox and the legs not started") {
    auto dir = tests::make_temp_dir("cancel");
    tests::write_file(dir / ".github/workflows/m.yml", workflow("true", "600"));
    // --bind: the steps leave their evidence in the repository directory.
    auto ran = tests::run_workflows(dir, {"--bind", "--report", (dir / "r.json").string()});
    CHECK(ran.exit_code == 1);
    auto report = tests::read_report(dir / "r.json");
    const auto& sleeping = leg(report, 0);
    const auto& failing = leg(report, 1);
    const auto& later = leg(report, 2);
    CHECK(text(failing, "conclusion") == "failure");
    CHECK(text(sleeping, "conclusion") == "cancelled");
    CHECK(text(later, "conclusion") == "cancelled");
    // The running leg: its step was stopped, not finished; later steps skipped but always().
    const auto& steps = sleeping.get("steps")->as_array();
    REQUIRE(steps.size() == 3);
    CHECK(text(steps[0], "conclusion") == "cancelled");
    CHECK(text(steps[1], "conclusion") == "skipped");
    CHECK(text(steps[2], "conclusion") == "success");
    CHECK_FALSE(std::filesystem::exists(dir / "slept"));
    CHECK_FALSE(std::filesystem::exists(dir / "after-sleep"));
    CHECK(tests::read_file(dir / "always-sleep") == "status=cancelled\n");
    // The leg that never started ran nothing.
    CHECK(later.get("steps")->as_array().empty());
    CHECK_FALSE(std::filesystem::exists(dir / "later-ran"));
    CHECK(text(sleeping, "message") == "cancelled: another leg of the matrix failed (fail-fast)");
}

TEST_CASE("fail-fast: false lets the other legs run to their end") {
    auto dir = tests::make_temp_dir("cancel");
    tests::write_file(dir / ".github/workflows/m.yml", workflow("false", "1"));
    // --bind: the steps leave their evidence in the repository directory.
    auto ran = tests::run_workflows(dir, {"--bind", "--report", (dir / "r.json").string()});
    CHECK(ran.exit_code == 1);
    auto report = tests::read_report(dir / "r.json");
    CHECK(text(leg(report, 0), "conclusion") == "success");
    CHECK(text(leg(report, 1), "conclusion") == "failure");
    CHECK(text(leg(report, 2), "conclusion") == "success");
    CHECK(std::filesystem::exists(dir / "slept"));
    CHECK(std::filesystem::exists(dir / "later-ran"));
    CHECK(tests::read_file(dir / "always-fail") == "status=failure\n");
}

namespace {

// Job `a` runs a step that would sleep 600 s (its shell carries `marker`), then an always()
// step; `follow` needs it and runs only if: always(); `plain` needs it with the default if.
std::string interrupted_workflow(const std::string& marker) {
    return R"(on: push
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - name: work
        run: |
          touch started
          sh -c 'sleep 600; : )" +
           marker + R"('
          touch finished
      - name: cleanup
        if: always()
        run: echo "status=${{ job.status }}" > always-a
  follow:
    needs: a
    if: always()
    runs-on: ubuntu-latest
    steps:
      - run: echo "a=${{ needs.a.result }}" > follow-ran
  plain:
    needs: a
    runs-on: ubuntu-latest
    steps:
      - run: touch plain-ran
)";
}

// Starts `sandgate run` in `dir` (output to dir/out.txt) and returns its pid.
pid_t start_run(const std::filesystem::path& dir) {
    const std::string binary = SANDGATE_BINARY;
    const std::string report = (dir / "r.json").string();
    const std::string out = (dir / "out.txt").string();
    const char* sandbox = tests::under_wrap() ? "off" : "bwrap";
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || ::dup2(fd, 1) < 0 || ::dup2(fd, 2) < 0 || ::chdir(dir.c_str()) != 0)
            ::_exit(99);
        // --bind: the steps' files (started, always-a, ...) are the test's evidence.
        ::execl(binary.c_str(), binary.c_str(), "run", "--bind", "--report", report.c_str(),
                "--sandbox", sandbox, static_cast<char*>(nullptr));
        ::_exit(98);
    }
    return pid;
}

}  // namespace

TEST_CASE(
    "SIGTERM to sandgate run stops the running step, concludes the run cancelled, exits 143") {
    auto dir = tests::make_temp_dir("cancel");
    const std::string marker = tests::unique_marker();
    tests::write_file(dir / ".github/workflows/w.yml", interrupted_workflow(marker));
    const pid_t pid = start_run(dir);
    REQUIRE(pid > 0);
    // No time limit: if the step never starts, the test hangs (ctest's timeout) rather than pass.
    while (!std::filesystem::exists(dir / "started") || tests::processes_with(marker).empty())
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const int status = tests::signal_and_wait(pid, SIGTERM);
    INFO(tests::read_file(dir / "out.txt"));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 143);  // the cancelled run's 128 + SIGTERM
    CHECK(tests::processes_with(marker).empty());
    CHECK_FALSE(std::filesystem::exists(dir / "finished"));
    auto report = tests::read_report(dir / "r.json");
    const auto& jobs = report.get("workflows")->as_array().at(0).get("jobs")->as_array();
    REQUIRE(jobs.size() == 3);
    CHECK(text(report.get("workflows")->as_array().at(0), "conclusion") == "cancelled");
    CHECK(text(jobs[0], "conclusion") == "cancelled");
    CHECK(text(jobs[0], "message") == "cancelled: the run was cancelled");
    const auto& steps = jobs[0].get("steps")->as_array();
    REQUIRE(steps.size() == 2);
    CHECK(text(steps[0], "conclusion") == "cancelled");
    CHECK(text(steps[1], "conclusion") == "success");
    CHECK(tests::read_file(dir / "always-a") == "status=cancelled\n");
    // A job whose if calls always() still runs; one with the default if is cancelled unrun.
    CHECK(text(jobs[1], "conclusion") == "success");
    CHECK(tests::read_file(dir / "follow-ran") == "a=cancelled\n");
    CHECK(text(jobs[2], "conclusion") == "cancelled");
    CHECK_FALSE(std::filesystem::exists(dir / "plain-ran"));
}
