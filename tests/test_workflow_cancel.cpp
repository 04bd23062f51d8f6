// fail-fast with real processes: when one matrix leg fails, the legs still running are
// cancelled through the sandbox (their process trees stopped, conclusion `cancelled`), the
// legs not started yet are cancelled without running, and fail-fast: false lets them finish.
// The sleeping leg sleeps 600 s: a cancel that does not work hangs the test (ctest's timeout)
// rather than passing it.
#include <catch2/catch.hpp>

#include <string>

#include "jobs/value.hpp"
#include "tests/run_helpers.hpp"
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
    auto ran = tests::run_workflows(dir, {"--report", (dir / "r.json").string()});
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
    auto ran = tests::run_workflows(dir, {"--report", (dir / "r.json").string()});
    CHECK(ran.exit_code == 1);
    auto report = tests::read_report(dir / "r.json");
    CHECK(text(leg(report, 0), "conclusion") == "success");
    CHECK(text(leg(report, 1), "conclusion") == "failure");
    CHECK(text(leg(report, 2), "conclusion") == "success");
    CHECK(std::filesystem::exists(dir / "slept"));
    CHECK(std::filesystem::exists(dir / "later-ran"));
    CHECK(tests::read_file(dir / "always-fail") == "status=failure\n");
}
