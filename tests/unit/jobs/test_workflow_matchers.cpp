// Problem matchers: the runner's matcher files (gcc-style single-line, eslint-style multi-line
// with loop), their validation, add-matcher / remove-matcher through the command processor,
// and real steps whose output is matched (matchers persisting across a job's steps).
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "jobs/expr/value.hpp"
#include "jobs/run/log.hpp"
#include "jobs/run/step_runner.hpp"
#include "jobs/workflow/workflow_matchers.hpp"
#include "tests/support/run_helpers.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

using namespace jobs;

namespace {

// actions/setup-gcc style (the matcher GitHub's own docs show).
constexpr std::string_view k_gcc = R"J({
  "problemMatcher": [{
    "owner": "gcc-problem-matcher",
    "pattern": [{
      "regexp": "^(.*?):(\\d+):(\\d*):?\\s+(?:fatal\\s+)?(warning|error):\\s+(.*?)(?:\\s+\\[(-W[\\w-]+)\\])?$",
      "file": 1, "line": 2, "column": 3, "severity": 4, "message": 5, "code": 6
    }]
  }]
})J";

// eslint-stylish: a file line, then one line per problem (loop).
constexpr std::string_view k_stylish = R"J({
  "problemMatcher": [{
    "owner": "eslint-stylish",
    "pattern": [
      {"regexp": "^([^\\s].*)$", "file": 1},
      {"regexp": "^\\s+(\\d+):(\\d+)\\s+(error|warning|info)\\s+(.*)\\s\\s+(.*)$",
       "line": 1, "column": 2, "severity": 3, "message": 4, "code": 5, "loop": true}
    ]
  }]
})J";

struct Fixture {
    std::filesystem::path dir = tests::make_temp_dir("matchers");
    Masker masker;
    MemoryLog log;
    StepLabel label{"job", "step"};
    std::vector<ProblemMatcher> job_matchers;
    CommandProcessor processor{masker, log, label, UnsecureCommands::disabled, Echo::off};

    Fixture() {
        processor.set_workspace(dir.string());
        processor.set_matchers(job_matchers);
        tests::write_file(dir / ".github/gcc.json", k_gcc);
        tests::write_file(dir / ".github/stylish.json", k_stylish);
        tests::write_file(dir / "src/main.c", "int main() {}\n");
        tests::write_file(dir / "src/app.js", "x\n");
    }
    const std::vector<Annotation>& annotations() { return processor.effects().annotations; }
    bool logged(std::string_view event) const {
        for (const auto& e : log.events()) {
            if (e == event) return true;
        }
        return false;
    }
};

std::string error_of(std::string_view json) {
    auto parsed = parse_problem_matchers(json, "m.json");
    return parsed ? std::string("<no error>") : parsed.error().message;
}

}  // namespace

TEST_CASE("a gcc matcher turns compiler lines into annotations, the line itself is not output") {
    Fixture f;
    f.processor.process_line("::add-matcher::.github/gcc.json");
    REQUIRE(f.job_matchers.size() == 1);
    f.processor.process_line("src/main.c:12:5: warning: unused variable 'x' [-Wunused-variable]");
    f.processor.process_line(f.dir.string() +
                             "/src/main.c:3:1: fatal error: stdio.h: No such file");
    f.processor.process_line("missing.c:1:1: error: gone");
    f.processor.process_line("plain output");
    REQUIRE(f.annotations().size() == 3);
    const auto& warning = f.annotations()[0];
    CHECK(warning.level == AnnotationLevel::warning);
    CHECK(warning.message == "unused variable 'x'");
    CHECK(warning.file.value_or("") == "src/main.c");
    CHECK(warning.line.value_or(0) == 12);
    CHECK(warning.column.value_or(0) == 5);
    CHECK(warning.code.value_or("") == "-Wunused-variable");
    const auto& fatal = f.annotations()[1];
    CHECK(fatal.level == AnnotationLevel::error);
    CHECK(fatal.file.value_or("") == "src/main.c");  // absolute under the workspace: relative
    CHECK(fatal.message == "stdio.h: No such file");
    CHECK_FALSE(fatal.code);
    // A file that does not exist is dropped, the annotation stays.
    CHECK_FALSE(f.annotations()[2].file);
    CHECK(f.annotations()[2].message == "gone");
    CHECK(f.logged("output:plain output"));
    CHECK_FALSE(
        f.logged("output:src/main.c:12:5: warning: unused variable 'x' [-Wunused-variable]"));
    CHECK(f.processor.effects().failures.empty());
}

TEST_CASE("a multi-line loop matcher carries the file to every problem line") {
    Fixture f;
    f.processor.process_line("::add-matcher::" + (f.dir / ".github/stylish.json").string());
    f.processor.process_line("src/app.js");
    f.processor.process_line("  1:10  error    Missing semicolon  semi");
    f.processor.process_line("  2:3  warning  Unexpected console  no-console");
    f.processor.process_line("");  // breaks the loop
    f.processor.process_line("  4:4  error  Not matched  any");
    REQUIRE(f.annotations().size() == 2);
    CHECK(f.annotations()[0].file.value_or("") == "src/app.js");
    CHECK(f.annotations()[0].line.value_or(0) == 1);
    CHECK(f.annotations()[0].column.value_or(0) == 10);
    CHECK(f.annotations()[0].message == "Missing semicolon");
    CHECK(f.annotations()[0].code.value_or("") == "semi");
    CHECK(f.annotations()[1].level == AnnotationLevel::warning);
    CHECK(f.annotations()[1].line.value_or(0) == 2);
    CHECK(f.annotations()[1].file.value_or("") == "src/app.js");
    // The file line started a running match (output); the broken loop's line is output.
    CHECK(f.logged("output:src/app.js"));
    CHECK(f.logged("output:  4:4  error  Not matched  any"));
}

TEST_CASE(
    "severity: the matcher's default, unsupported severities and blank messages are dropped") {
    Fixture f;
    tests::write_file(f.dir / "m.json",
                      R"J({"problemMatcher": [{"owner": "lint", "severity": "warning",
        "pattern": [{"regexp": "^lint(?:\\[(\\w*)\\])?: (.*)$", "severity": 1, "message": 2}]}]})J");
    f.processor.process_line("::add-matcher::m.json");
    f.processor.process_line("lint: defaulted");
    f.processor.process_line("lint[error]: explicit");
    f.processor.process_line("lint[info]: unsupported");
    f.processor.process_line("lint:  ");
    REQUIRE(f.annotations().size() == 2);
    CHECK(f.annotations()[0].level == AnnotationLevel::warning);
    CHECK(f.annotations()[1].level == AnnotationLevel::error);
    CHECK(f.logged("output:lint[info]: unsupported"));
    CHECK(
        f.logged("debug:Skipped logging an issue for the matched line because the severity 'info' "
                 "is not supported."));
}

TEST_CASE("colour codes are stripped before matching; messages and codes are masked") {
    Fixture f;
    f.masker.add_secret("hunter22");
    f.processor.process_line("::add-matcher::.github/gcc.json");
    f.processor.process_line("\x1b[1msrc/main.c:1:2:\x1b[0m \x1b[31merror:\x1b[0m leaked hunter22");
    REQUIRE(f.annotations().size() == 1);
    CHECK(f.annotations()[0].message == "leaked ***");
    CHECK(f.annotations()[0].file.value_or("") == "src/main.c");
    CHECK(strip_color_codes("a\x1b[1;31mb\x1b[0mc\x1b[Kd") == "abc\x1b[Kd");
}

TEST_CASE("remove-matcher by owner or by file; replacing an owner; the runner's warnings") {
    Fixture f;
    f.processor.process_line("::add-matcher::.github/gcc.json");
    f.processor.process_line("::add-matcher::.github/stylish.json");
    REQUIRE(f.job_matchers.size() == 2);
    CHECK(f.job_matchers[0].owner == "eslint-stylish");           // newest first
    f.processor.process_line("::add-matcher::.github/gcc.json");  // replaces, moves to the front
    REQUIRE(f.job_matchers.size() == 2);
    CHECK(f.job_matchers[0].owner == "gcc-problem-matcher");
    f.processor.process_line("::remove-matcher owner=GCC-problem-matcher::");
    REQUIRE(f.job_matchers.size() == 1);
    f.processor.process_line("src/main.c:1:1: error: no longer matched");
    CHECK(f.logged("output:src/main.c:1:1: error: no longer matched"));
    f.processor.process_line("::remove-matcher::.github/stylish.json");
    CHECK(f.job_matchers.empty());
    f.processor.process_line("::remove-matcher owner=x::file.json");
    f.processor.process_line("::remove-matcher::");
    f.processor.process_line("::add-matcher::");
    REQUIRE(f.annotations().size() == 3);
    CHECK(f.annotations()[0].message ==
          "Either specify an owner name or a file path in ##[remove-matcher] command. Both values "
          "cannot be set.");
    CHECK(f.annotations()[1].message ==
          "Either an owner name or a file path must be specified in ##[remove-matcher] command.");
    CHECK(f.annotations()[2].message == "File path must be specified.");
    CHECK(f.processor.effects().failures.empty());
}

TEST_CASE("an invalid or missing matcher file fails the step with the runner's message") {
    Fixture f;
    tests::write_file(
        f.dir / "bad.json",
        R"J({"problemMatcher": [{"owner": "x", "pattern": [{"regexp": "(a)", "message": 2}]}]})J");
    f.processor.process_line("::add-matcher::bad.json");
    f.processor.process_line("::add-matcher::nowhere.json");
    const auto& failures = f.processor.effects().failures;
    REQUIRE(failures.size() == 2);
    CHECK(failures[0] ==
          (f.dir / "bad.json").string() +
              ": matcher 'x', pattern 0: The property 'message' is set to 2 which is out of range");
    CHECK(failures[1] == (f.dir / "nowhere.json").string() + ": cannot be read");
    CHECK(f.job_matchers.empty());
}

TEST_CASE("matcher validation follows the runner's rules") {
    CHECK(error_of(R"J({"problemMatcher": [{"pattern": [{"regexp": "a", "message": 0}]}]})J") ==
          "m.json: Owner must not be empty");
    CHECK(error_of(R"J({"problemMatcher": [{"owner": "o", "pattern": []}]})J") ==
          "m.json: Matcher 'o' does not contain any patterns");
    CHECK(
        error_of(
            R"J({"problemMatcher": [{"owner": "o", "severity": "info", "pattern": [{"regexp": "a", "message": 0}]}]})J") ==
        "m.json: Matcher 'o' contains unexpected default severity 'info'");
    CHECK(
        error_of(
            R"J({"problemMatcher": [{"owner": "o", "pattern": [{"regexp": "(a)", "message": 1, "loop": true}]}]})J") ==
        "m.json: matcher 'o', pattern 0: Only the last pattern in a multiline matcher may set "
        "'loop'");
    CHECK(
        error_of(
            R"J({"problemMatcher": [{"owner": "o", "pattern": [{"regexp": "(a)", "file": 1}, {"regexp": "(b)", "line": 1, "loop": true}]}]})J") ==
        "m.json: matcher 'o', pattern 1: The loop pattern must set 'message'");
    CHECK(
        error_of(
            R"J({"problemMatcher": [{"owner": "o", "pattern": [{"regexp": "(a)", "file": 1}, {"regexp": "(b)", "file": 1, "message": 1}]}]})J") ==
        "m.json: matcher 'o', pattern 1: The property 'file' is set twice");
    CHECK(
        error_of(
            R"J({"problemMatcher": [{"owner": "o", "pattern": [{"regexp": "(a)", "file": 1}]}]})J") ==
        "m.json: At least one pattern must set 'message'");
    CHECK(
        error_of(
            R"J({"problemMatcher": [{"owner": "o", "pattern": [{"regexp": "(a", "message": 0}]}]})J")
            .starts_with("m.json: matcher 'o', pattern 0: invalid regexp '(a'"));
    CHECK(
        error_of(R"J({"problemMatcher": [{"owner": "o", "pattern": [{"regexp": "a", "message": 0}]},
                                           {"owner": "O", "pattern": [{"regexp": "a", "message": 0}]}]})J") ==
        "m.json: Duplicate owner name 'O'");
    CHECK(
        error_of(
            R"J({"problemMatcher": [{"owner": "o", "pattern": [{"regexp": "a", "message": "0"}]}]})J") ==
        "m.json: matcher 'o', pattern 0: The property 'message' must be a whole number");
    CHECK(error_of("{not json").starts_with("m.json: invalid JSON"));
    auto empty = parse_problem_matchers(R"J({"other": 1})J", "m.json");
    REQUIRE(empty);
    CHECK(empty->empty());
}

TEST_CASE("a catastrophic regexp hits the match limit and its matcher is removed with a warning") {
    Fixture f;
    tests::write_file(
        f.dir / "slow.json",
        R"J({"problemMatcher": [{"owner": "slow", "pattern": [{"regexp": "^(a+)+$", "message": 1}]}]})J");
    f.processor.process_line("::add-matcher::slow.json");
    f.processor.process_line(std::string(40, 'a') + "!");
    REQUIRE(f.annotations().size() == 1);
    CHECK(f.annotations()[0].level == AnnotationLevel::warning);
    CHECK(f.annotations()[0].message.starts_with("Removing issue matcher 'slow'."));
    f.processor.process_line("aaa");  // the matcher is gone: plain output
    CHECK(f.logged("output:aaa"));
}

TEST_CASE("real steps: a matcher added by one step matches the output of the job's later steps") {
    const auto dir = tests::make_temp_dir("matcher-steps");
    tests::write_file(dir / "gcc.json", k_gcc);
    tests::write_file(dir / "lib/util.c", "int f;\n");
    Masker masker;
    MemoryLog log;
    JobState job;
    StepContext context;
    context.label = {"build", "step"};
    context.policy.mode = sandbox::SandboxMode::off;
    context.temp_dir = dir / "runner_temp";
    context.workspace = dir;
    context.masker = &masker;
    context.log = &log;
    context.host = sandbox::current_environment();
    auto step = [&](const std::string& script) {
        StepSpec spec;
        spec.script = script;
        spec.shell = "bash";
        spec.working_directory = dir;
        return run_step(spec, context, job);
    };
    const auto first =
        step("echo '::add-matcher::gcc.json'\necho 'lib/util.c:7:3: error: boom' >&2\n");
    CHECK(first.outcome == Outcome::success);
    REQUIRE(first.annotations.size() == 1);
    CHECK(first.annotations[0].file.value_or("") == "lib/util.c");
    CHECK(first.annotations[0].line.value_or(0) == 7);
    REQUIRE(job.matchers.size() == 1);
    const auto second = step("printf 'lib/util.c:9:1: warning: again [-Wall]\\n'\n");
    REQUIRE(second.annotations.size() == 1);
    CHECK(second.annotations[0].level == AnnotationLevel::warning);
    CHECK(second.annotations[0].code.value_or("") == "-Wall");
    const auto third = step(
        "echo '::remove-matcher owner=gcc-problem-matcher::'\necho 'lib/util.c:1:1: error: x'\n");
    CHECK(third.annotations.empty());
    CHECK(job.matchers.empty());
    const auto bad = step(
        "echo '{}' > broken.json; echo '{\"problemMatcher\": 3}' > broken.json\necho "
        "'::add-matcher::broken.json'\n");
    CHECK(bad.outcome == Outcome::failure);  // the runner fails a step whose command failed
}

TEST_CASE("sandgate run: a matcher added in one step annotates a later step, in the report") {
    const auto dir = tests::make_temp_dir("matcher-run");
    tests::write_file(dir / ".github/gcc.json", k_gcc);
    tests::write_file(dir / "src/main.c", "int main() {}\n");
    tests::write_file(dir / ".github/workflows/ci.yml", R"J(on: push
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - run: echo "::add-matcher::.github/gcc.json"
      - name: compile
        run: |
          echo "$GITHUB_WORKSPACE/src/main.c:4:2: warning: shadowed [-Wshadow]"
)J");
    const std::string posture = tests::under_wrap() ? "off" : "bwrap";
    auto ran = tests::run_sandgate(
        dir, {"run", "--sandbox", posture, "--report", (dir / "r.json").string()});
    UNSCOPED_INFO(ran.output);
    REQUIRE(ran.exit_code == 0);
    auto report = jobs::parse_json(tests::read_file(dir / "r.json"));
    REQUIRE(report);
    const auto& job = report->get("workflows")->as_array().at(0).get("jobs")->as_array().at(0);
    const auto& annotations = job.get("steps")->as_array().at(1).get("annotations")->as_array();
    REQUIRE(annotations.size() == 1);
    CHECK(annotations[0].get("level")->as_string() == "warning");
    CHECK(annotations[0].get("file")->as_string() == "src/main.c");
    CHECK(annotations[0].get("line")->as_number() == 4);
    CHECK(annotations[0].get("code")->as_string() == "-Wshadow");
    CHECK(annotations[0].get("message")->as_string() == "shadowed");
}
