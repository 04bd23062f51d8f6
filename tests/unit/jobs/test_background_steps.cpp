// Background steps (`background: true`, `wait`, `wait-all`, `cancel`, `parallel`): the model
// the parser builds and refuses, and real workflows run through `sandgate run`.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>

#include "jobs/expr/value.hpp"
#include "jobs/workflow/workflow_model.hpp"
#include "tests/support/run_helpers.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

const jobs::Value& job_at(const jobs::Value& report, std::size_t job) {
    return report.get("workflows")->as_array().at(0).get("jobs")->as_array().at(job);
}

const jobs::Value& step_at(const jobs::Value& job, std::size_t step) {
    return job.get("steps")->as_array().at(step);
}

std::string text(const jobs::Value& value, std::string_view key) {
    const jobs::Value* found = value.get(key);
    return found == nullptr ? "" : found->to_display_string();
}

// A shell loop that waits (at most 30 s) for `file` to exist, then fails if it does not; its
// second line indented by `indent` spaces, as the block scalar it goes in.
std::string await_file(const std::string& file, std::size_t indent = 10) {
    return "for i in $(seq 300); do test -f " + file + " && break; sleep 0.1; done\n" +
           std::string(indent, ' ') + "test -f " + file;
}

std::string parse_error(const std::string& steps) {
    auto parsed = jobs::parse_workflow(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n" + steps, "bg.yml");
    REQUIRE_FALSE(parsed.has_value());
    return parsed.error().message;
}

}  // namespace

TEST_CASE("the parser models background, wait, wait-all, cancel and parallel steps") {
    auto parsed = jobs::parse_workflow(R"(on: push
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - id: server
        run: sleep 60
        background: true
      - id: tool
        uses: ./tool
        background: false
      - parallel:
          - id: left
            run: echo left
          - run: echo right
      - wait: [left, SERVER]
      - wait-all:
      - name: none
        wait-all: false
      - cancel: server
)",
                                       "bg.yml");
    REQUIRE(parsed.has_value());
    const auto& steps = parsed->jobs.at(0).steps;
    REQUIRE(steps.size() == 7);
    CHECK(steps[0].kind == jobs::StepKind::run);
    CHECK(steps[0].background);
    CHECK(steps[1].kind == jobs::StepKind::uses);
    CHECK_FALSE(steps[1].background);
    CHECK(steps[2].kind == jobs::StepKind::parallel);
    REQUIRE(steps[2].parallel.size() == 2);
    CHECK(steps[2].parallel[0].background);
    CHECK(steps[2].parallel[1].background);
    CHECK(steps[2].parallel[1].block == std::optional<std::size_t>(2));
    CHECK(steps[3].kind == jobs::StepKind::wait);
    REQUIRE(steps[3].targets.size() == 2);
    CHECK(steps[3].targets[1].value == "SERVER");
    CHECK(steps[3].display_name() == "Wait for left, SERVER");
    CHECK(steps[4].kind == jobs::StepKind::wait_all);
    CHECK(steps[4].wait_all);
    CHECK_FALSE(steps[5].wait_all);
    CHECK(steps[6].kind == jobs::StepKind::cancel);
    CHECK(steps[6].display_name() == "Cancel server");
}

TEST_CASE("a wait or cancel naming no earlier background step is refused with file:line") {
    CHECK(parse_error("      - run: echo\n      - wait: nosuch\n") ==
          "bg.yml:7:15: wait: 'nosuch' is not the id of a step before this one");
    CHECK(parse_error("      - id: fg\n        run: echo\n      - wait: [fg]\n") ==
          "bg.yml:8:16: wait: 'fg' is not a background step (it has no background: true)");
    // A step after the wait does not count.
    CHECK(parse_error("      - cancel: later\n      - id: later\n        run: sleep 9\n        "
                      "background: true\n") ==
          "bg.yml:6:17: cancel: 'later' is not the id of a step before this one");
    CHECK(parse_error("      - parallel:\n          - run: echo\n          - wait-all:\n") ==
          "bg.yml:8:13: a parallel block holds run and uses steps only");
    // Through the CLI: exit 2 and the one line.
    auto dir = tests::make_temp_dir("bg");
    tests::write_file(dir / "bad/bad.yml",
                      "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: "
                      "echo\n      - wait: ghost\n");
    auto ran = tests::run_workflows(dir, {"-W", "bad"});
    CHECK(ran.exit_code == 2);
    CHECK(ran.output.find(
              "bad/bad.yml:7:15: wait: 'ghost' is not the id of a step before this one") !=
          std::string::npos);
}

TEST_CASE(
    "two background steps overlap; a wait makes their outputs and env visible; lines never mix") {
    auto dir = tests::make_temp_dir("bg");
    tests::write_file(dir / ".github/workflows/ci.yml", R"(on: push
jobs:
  bg:
    runs-on: ubuntu-latest
    steps:
      - id: a
        name: left
        background: true
        run: |
          touch a.flag
          )" + await_file("b.flag") + R"(
          echo "word=from-a" >> "$GITHUB_OUTPUT"
          echo "FROM_A=yes" >> "$GITHUB_ENV"
          for i in $(seq 40); do printf 'A%.0s' $(seq 400); echo; done
      - id: b
        name: right
        background: true
        run: |
          touch b.flag
          )" + await_file("a.flag") + R"(
          for i in $(seq 40); do printf 'B%.0s' $(seq 400); echo; done
      - name: before the wait
        run: |
          test -z "${{ steps.a.outputs.word }}"
          test -z "$FROM_A"
      - wait: [a, b]
      - name: after the wait
        run: |
          test "${{ steps.a.outputs.word }}" = from-a
          test "$FROM_A" = yes
          test "${{ steps.b.outcome }}" = success
)");
    auto ran = tests::run_workflows(dir, {"--report", (dir / "r.json").string()});
    REQUIRE(ran.exit_code == 0);
    auto report = tests::read_report(dir / "r.json");
    const auto& job = job_at(report, 0);
    REQUIRE(job.get("steps")->as_array().size() == 5);
    CHECK(text(step_at(job, 0), "id") == "a");  // at its place, filled in at the wait
    CHECK(text(step_at(job, 0), "conclusion") == "success");
    CHECK(text(step_at(job, 1), "id") == "b");
    CHECK(text(step_at(job, 3), "name") == "Wait for a, b");
    CHECK(text(step_at(job, 4), "conclusion") == "success");
    // Each long line whole, under its own step's label.
    std::istringstream lines(ran.output);
    std::string line;
    int a_lines = 0, b_lines = 0;
    const std::string as(400, 'A'), bs(400, 'B');
    while (std::getline(lines, line)) {
        if (line.find("AAAA") != std::string::npos) {
            CHECK(line == "[bg/left]   | " + as);
            ++a_lines;
        }
        if (line.find("BBBB") != std::string::npos) {
            CHECK(line == "[bg/right]   | " + bs);
            ++b_lines;
        }
    }
    CHECK(a_lines == 40);
    CHECK(b_lines == 40);
}

TEST_CASE("a parallel block runs its steps at once and waits for them before the next step") {
    auto dir = tests::make_temp_dir("bg");
    tests::write_file(dir / ".github/workflows/ci.yml", R"(on: push
jobs:
  par:
    runs-on: ubuntu-latest
    steps:
      - parallel:
          - id: p1
            run: |
              touch p1.flag
              )" + await_file("p2.flag", 14) + R"(
              echo "x=1" >> "$GITHUB_OUTPUT"
          - run: |
              touch p2.flag
              )" + await_file("p1.flag", 14) + R"(
              echo "Y=2" >> "$GITHUB_ENV"
      - run: test "${{ steps.p1.outputs.x }}$Y" = 12
)");
    auto ran = tests::run_workflows(dir, {"--report", (dir / "r.json").string()});
    REQUIRE(ran.exit_code == 0);
    auto report = tests::read_report(dir / "r.json");
    const auto& job = job_at(report, 0);
    REQUIRE(job.get("steps")->as_array().size() == 3);
    CHECK(text(step_at(job, 1), "id") == "__step_1_2");
    CHECK(text(step_at(job, 2), "conclusion") == "success");
}

TEST_CASE("a failing background step fails the job at the wait, unless it may fail") {
    auto dir = tests::make_temp_dir("bg");
    tests::write_file(dir / ".github/workflows/ci.yml", R"(on: push
jobs:
  fails:
    runs-on: ubuntu-latest
    steps:
      - id: bad
        background: true
        run: sleep 0.3; exit 3
      - id: soft
        background: true
        continue-on-error: true
        run: exit 2
      - name: before the wait
        run: echo ran-before-the-wait
      - wait-all:
      - name: after the wait
        run: echo should-not-run
  soft:
    runs-on: ubuntu-latest
    steps:
      - id: soft
        background: true
        continue-on-error: true
        run: exit 2
      - wait: soft
      - run: test "${{ steps.soft.outcome }}/${{ steps.soft.conclusion }}" = failure/success
)");
    auto ran = tests::run_workflows(dir, {"--report", (dir / "r.json").string()});
    CHECK(ran.exit_code == 1);
    CHECK(ran.output.find("ran-before-the-wait") != std::string::npos);
    CHECK(ran.output.find("should-not-run") == std::string::npos);
    auto report = tests::read_report(dir / "r.json");
    const auto& fails = job_at(report, 0);
    CHECK(text(fails, "conclusion") == "failure");
    CHECK(text(step_at(fails, 0), "conclusion") == "failure");
    CHECK(text(step_at(fails, 0), "exit_code") == "3");
    CHECK(text(step_at(fails, 1), "conclusion") == "success");
    CHECK(text(step_at(fails, 2), "conclusion") == "success");
    CHECK(text(step_at(fails, 3), "name") == "Wait for all background steps");
    CHECK(text(step_at(fails, 3), "message") == "the background step 'bad' failed");
    CHECK(text(step_at(fails, 4), "conclusion") == "skipped");
    CHECK(text(job_at(report, 1), "conclusion") == "success");
}

TEST_CASE("cancel stops a background step's process tree at once; its outcome is cancelled") {
    auto dir = tests::make_temp_dir("bg");
    // The grandchild holds the output pipe: the step ends only once the whole tree is gone.
    tests::write_file(dir / ".github/workflows/ci.yml", R"(on: push
jobs:
  svc:
    runs-on: ubuntu-latest
    steps:
      - id: server
        background: true
        run: |
          sh -c 'sleep 60; echo grandchild-survived' &
          touch started.flag
          sleep 60
          echo server-survived
      - run: |
          )" + await_file("started.flag") + R"(
      - cancel: server
      - run: test "${{ steps.server.outcome }}/${{ steps.server.conclusion }}" = cancelled/cancelled
)");
    const auto started = std::chrono::steady_clock::now();
    auto ran = tests::run_workflows(dir, {"--report", (dir / "r.json").string()});
    const auto took = std::chrono::steady_clock::now() - started;
    REQUIRE(ran.exit_code == 0);
    CHECK(took < std::chrono::seconds(20));
    CHECK(ran.output.find("| grandchild-survived") == std::string::npos);
    CHECK(ran.output.find("| server-survived") == std::string::npos);
    auto report = tests::read_report(dir / "r.json");
    const auto& job = job_at(report, 0);
    CHECK(text(job, "conclusion") == "success");
    CHECK(text(step_at(job, 0), "outcome") == "cancelled");
    CHECK(text(step_at(job, 0), "message") == "cancelled by a cancel: step");
    CHECK(text(step_at(job, 2), "name") == "Cancel server");
    CHECK(text(step_at(job, 2), "conclusion") == "success");
}

TEST_CASE("at the job's end the background steps still running are waited for, and count") {
    auto dir = tests::make_temp_dir("bg");
    tests::write_file(dir / ".github/workflows/ci.yml", R"(on: push
jobs:
  late:
    runs-on: ubuntu-latest
    outputs:
      v: ${{ steps.late.outputs.v }}
    steps:
      - id: late
        background: true
        run: sleep 0.5; echo "v=waited" >> "$GITHUB_OUTPUT"
      - run: echo foreground-done
  check:
    needs: late
    runs-on: ubuntu-latest
    steps:
      - run: test "${{ needs.late.outputs.v }}" = waited
  unwaited:
    runs-on: ubuntu-latest
    steps:
      - background: true
        run: sleep 0.3; exit 5
      - run: echo done
)");
    auto ran = tests::run_workflows(dir, {"--report", (dir / "r.json").string()});
    CHECK(ran.exit_code == 1);
    CHECK(ran.output.find("waiting for the background steps still running") != std::string::npos);
    auto report = tests::read_report(dir / "r.json");
    std::string late, check, unwaited;
    for (const auto& job : report.get("workflows")->as_array().at(0).get("jobs")->as_array()) {
        if (text(job, "id") == "late") late = text(job, "conclusion");
        if (text(job, "id") == "check") check = text(job, "conclusion");
        if (text(job, "id") == "unwaited") {
            unwaited = text(job, "conclusion");
            CHECK(text(step_at(job, 0), "exit_code") == "5");
            CHECK(text(step_at(job, 0), "id") == "__step_1");
        }
    }
    CHECK(late == "success");
    CHECK(check == "success");
    CHECK(unwaited == "failure");
}

TEST_CASE("at most ten background steps run at once; the others start as slots free") {
    auto dir = tests::make_temp_dir("bg");
    std::string yaml = "on: push\njobs:\n  many:\n    runs-on: ubuntu-latest\n    steps:\n";
    for (int i = 0; i < 11; ++i) {
        yaml += "      - background: true\n        run: |\n          touch running-" +
                std::to_string(i) + "\n          " + await_file("go") + "\n";
    }
    // Once ten run, the eleventh has not started a second later; then they are let go.
    yaml +=
        "      - run: |\n          until [ \"$(ls running-* 2>/dev/null | wc -l)\" -ge 10 ]; do "
        "sleep 0.05; done\n"
        "          sleep 1\n          test \"$(ls running-* | wc -l)\" -eq 10\n          touch "
        "go\n";
    yaml += "      - wait-all:\n      - run: test \"$(ls running-* | wc -l)\" -eq 11\n";
    tests::write_file(dir / ".github/workflows/ci.yml", yaml);
    auto ran = tests::run_workflows(dir, {"--report", (dir / "r.json").string()});
    REQUIRE(ran.exit_code == 0);
    auto report = tests::read_report(dir / "r.json");
    const auto& job = job_at(report, 0);
    REQUIRE(job.get("steps")->as_array().size() == 14);
    for (std::size_t i = 0; i < 14; ++i) CHECK(text(step_at(job, i), "conclusion") == "success");
}
