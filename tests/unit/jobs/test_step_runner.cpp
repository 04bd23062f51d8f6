#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>

#include "jobs/run/step_runner.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

using namespace jobs;

namespace {

struct Harness {
    std::filesystem::path dir = tests::make_temp_dir("step");
    Masker masker;
    MemoryLog log;
    JobState job;
    StepContext context;

    Harness() {
        context.label = {"build", "step"};
        context.policy.mode = sandbox::SandboxMode::off;
        context.temp_dir = dir / "runner_temp";
        context.masker = &masker;
        context.log = &log;
        context.host = sandbox::current_environment();
    }

    StepResult run(const std::string& script, std::string shell = "bash") {
        StepSpec spec;
        spec.script = script;
        spec.shell = std::move(shell);
        spec.working_directory = dir;
        return run_step(spec, context, job);
    }

    bool logged(std::string_view event) const {
        for (const auto& e : log.events()) {
            if (e == event) return true;
        }
        return false;
    }
};

const std::string* named(const NamedValues& values, std::string_view name) {
    return find_named(values, name);
}

// The value, or "<missing>" (so a failing check reports instead of crashing).
std::string value_of(const NamedValues& values, std::string_view name) {
    const auto* value = find_named(values, name);
    return value ? *value : std::string("<missing>");
}

}  // namespace

TEST_CASE("a run step's output, exit status and file commands") {
    Harness h;
    const auto result = h.run(
        "echo hello from $PWD\n"
        "echo to-stderr >&2\n"
        "echo 'greeting=hi there' >> \"$GITHUB_OUTPUT\"\n"
        "printf 'multi<<EOF\\nline 1\\nline 2\\nEOF\\n' >> \"$GITHUB_OUTPUT\"\n"
        "echo 'NEW_VAR=new value' >> \"$GITHUB_ENV\"\n"
        "echo /opt/some-tools >> \"$GITHUB_PATH\"\n"
        "echo 'pid=42' >> \"$GITHUB_STATE\"\n"
        "echo '# Summary' >> \"$GITHUB_STEP_SUMMARY\"\n");
    CHECK(result.outcome == Outcome::success);
    CHECK(result.conclusion == Outcome::success);
    REQUIRE(result.exit_code);
    CHECK(*result.exit_code == 0);
    CHECK(result.stdout_bytes > 0);
    CHECK(result.stderr_bytes == std::string("to-stderr\n").size());
    CHECK(result.error.empty());
    REQUIRE(named(result.outputs, "greeting"));
    CHECK(value_of(result.outputs, "greeting") == "hi there");
    CHECK(value_of(result.outputs, "multi") == "line 1\nline 2");
    CHECK(value_of(result.state, "pid") == "42");
    CHECK(result.summary == "# Summary\n");
    CHECK(value_of(h.job.env, "NEW_VAR") == "new value");
    CHECK(h.job.path.entries() == std::vector<std::string>{"/opt/some-tools"});
    CHECK(h.logged("output:hello from " + h.dir.string()));
    CHECK(h.logged("output:to-stderr"));
    CHECK(h.logged("status:start:Run step"));
    CHECK(h.logged("status:success:Success - step"));
    // The scratch files are gone.
    CHECK(std::filesystem::is_empty(h.context.temp_dir / "_runner_file_commands"));
}

TEST_CASE("GITHUB_ENV and GITHUB_PATH reach the next step, step env wins") {
    Harness h;
    const auto tools = h.dir / "tools";
    std::filesystem::create_directories(tools);
    tests::write_file(tools / "mytool", "#!/bin/sh\necho mytool ran\n");
    std::filesystem::permissions(tools / "mytool", std::filesystem::perms::owner_all);
    h.job.env = {{"JOB_LEVEL", "job"}, {"OVERRIDDEN", "job"}};
    REQUIRE(h.run("echo 'FROM_ENV_FILE=first' >> $GITHUB_ENV\necho '" + tools.string() +
                  "' >> $GITHUB_PATH\n")
                .outcome == Outcome::success);
    StepSpec spec;
    spec.script = "echo \"$JOB_LEVEL $FROM_ENV_FILE $OVERRIDDEN\"\nmytool\n";
    spec.shell = "sh";
    spec.env = {{"OVERRIDDEN", "step"}};
    const auto second = run_step(spec, h.context, h.job);
    CHECK(second.outcome == Outcome::success);
    CHECK(h.logged("output:job first step"));
    CHECK(h.logged("output:mytool ran"));
}

TEST_CASE("workflow commands are applied live and everything shown is masked") {
    Harness h;
    h.masker.add_secret("known-secret-1");
    const auto result = h.run(
        "echo '::group::Compile'\n"
        "echo known-secret-1\n"
        "printf 'split-'; sleep 0.05; printf 'secret-2\\n'\n"  // one line in two writes
        "echo '::endgroup::'\n"
        "echo '::add-mask::split-secret-2'\n"
        "printf 'split-'; sleep 0.05; printf 'secret-2 again\\n'\n"
        "echo '::error file=src/a.c,line=7,title=Bad known-secret-1::broke known-secret-1'\n"
        "echo '::warning::careful' >&2\n"
        "echo '::set-output name=legacy::v1'\n"
        "echo '::save-state name=st::s1'\n"
        "echo 'known-secret-1' >> $GITHUB_STEP_SUMMARY\n");
    CHECK(result.outcome == Outcome::success);
    const auto log = h.log.joined();
    CHECK(log.find("known-secret-1") == std::string::npos);
    CHECK(h.logged("group:Compile"));
    CHECK(h.logged("output:***"));
    CHECK(h.logged("output:split-secret-2"));  // before add-mask it was not a secret
    CHECK(h.logged("output:*** again"));
    CHECK(h.logged("endgroup"));
    REQUIRE(result.annotations.size() >= 2);
    const auto& error = result.annotations[0];  // stdout lines keep their order
    CHECK(error.level == AnnotationLevel::error);
    CHECK(error.message == "broke ***");
    CHECK(*error.title == "Bad ***");
    CHECK(*error.line == 7);
    // stderr is drained on its own pipe: its order against stdout is not defined.
    CHECK(std::any_of(result.annotations.begin(), result.annotations.end(),
                      [](const Annotation& a) { return a.message == "careful"; }));
    CHECK(value_of(result.outputs, "legacy") == "v1");
    CHECK(value_of(result.state, "st") == "s1");
    CHECK(result.summary == "***\n");
}

TEST_CASE("a failing step reports its exit code; continue-on-error concludes success") {
    Harness h;
    StepSpec spec;
    spec.script = "echo partial=yes >> $GITHUB_OUTPUT\nexit 3\n";
    spec.shell = "bash";
    auto result = run_step(spec, h.context, h.job);
    CHECK(result.outcome == Outcome::failure);
    CHECK(result.conclusion == Outcome::failure);
    REQUIRE(result.exit_code);
    CHECK(*result.exit_code == 3);
    CHECK(result.error == "Process completed with exit code 3.");
    CHECK(value_of(result.outputs, "partial") == "yes");  // outputs survive a failure
    CHECK(h.logged("annotation:error::Process completed with exit code 3."));
    CHECK(h.logged("status:failure:Failure - step"));

    spec.continue_on_error = ContinueOnError::yes;
    result = run_step(spec, h.context, h.job);
    CHECK(result.outcome == Outcome::failure);
    CHECK(result.conclusion == Outcome::success);
}

TEST_CASE("bash runs with pipefail; the default shell does not") {
    Harness h;
    CHECK(h.run("false | true\necho reached\n", "bash").outcome == Outcome::failure);
    CHECK(h.run("false | true\necho reached\n", "").outcome == Outcome::success);
    CHECK(h.run("false\necho not reached\n", "sh").outcome == Outcome::failure);
    CHECK_FALSE(h.logged("output:not reached"));
}

TEST_CASE("a step over its timeout is killed and fails") {
    Harness h;
    StepSpec spec;
    spec.script = "echo started\nsleep 600\n";
    spec.timeout = std::chrono::milliseconds(300);
    const auto result = run_step(spec, h.context, h.job);
    CHECK(result.outcome == Outcome::failure);
    CHECK(result.timed_out);
    CHECK(result.error.starts_with("The step has timed out after 300 ms."));
    CHECK(h.logged("output:started"));
}

TEST_CASE("a bad file command or a refused command fails the step") {
    Harness h;
    auto result = h.run("echo 'not a valid line' >> $GITHUB_OUTPUT\n");
    CHECK(result.outcome == Outcome::failure);
    CHECK(result.error == "GITHUB_OUTPUT:1: Invalid format 'not a valid line'");

    result = h.run("echo '::set-env name=LEGACY::1'\n");
    CHECK(result.outcome == Outcome::failure);
    CHECK(result.error.starts_with("The `set-env` command is disabled."));
    CHECK(named(h.job.env, "LEGACY") == nullptr);

    StepSpec spec;
    spec.script = "echo '::set-env name=LEGACY::1'\necho '::add-path::/opt/legacy'\n";
    spec.env = {{"ACTIONS_ALLOW_UNSECURE_COMMANDS", "true"}};
    result = run_step(spec, h.context, h.job);
    CHECK(result.outcome == Outcome::success);
    CHECK(value_of(h.job.env, "LEGACY") == "1");
    CHECK(h.job.path.entries() == std::vector<std::string>{"/opt/legacy"});
}

TEST_CASE("steps that cannot start fail with a clear error and run nothing") {
    Harness h;
    auto result = h.run("echo hi\n", "perl -w");
    CHECK(result.outcome == Outcome::failure);
    CHECK_FALSE(result.exit_code);
    CHECK(result.error.find("format string containing '{0}'") != std::string::npos);
    CHECK_FALSE(h.logged("output:hi"));

    StepSpec spec;
    spec.script = "echo hi\n";
    spec.working_directory = h.dir / "missing";
    result = run_step(spec, h.context, h.job);
    CHECK(result.outcome == Outcome::failure);
    CHECK(result.error == "working-directory '" + (h.dir / "missing").string() +
                              "' does not exist or is not a directory");
}

TEST_CASE("python steps and node actions with INPUT_ and STATE_ variables") {
    Harness h;
    auto python = h.run("import os\nprint('py', os.environ['GITHUB_OUTPUT'] != '')\n", "python");
    CHECK(python.outcome == Outcome::success);
    CHECK(h.logged("output:py True"));

    const auto action = h.dir / "action";
    tests::write_file(action / "main.js",
                      "const fs = require('fs');\n"
                      "console.log('input=' + process.env['INPUT_WHO_TO_GREET']);\n"
                      "console.log('state=' + process.env['STATE_previous']);\n"
                      "fs.appendFileSync(process.env.GITHUB_STATE, 'cleanup=yes\\n');\n"
                      "fs.appendFileSync(process.env.GITHUB_OUTPUT, 'time=now\\n');\n");
    StepSpec spec;
    spec.argv = {"node", (action / "main.js").string()};
    spec.env = input_environment({{"who to greet", "Mona"}});
    const auto state_env = state_environment({{"previous", "p1"}});
    spec.env.insert(spec.env.end(), state_env.begin(), state_env.end());
    CHECK(spec.env[0].first == "INPUT_WHO_TO_GREET");
    const auto result = run_step(spec, h.context, h.job);
    CHECK(result.outcome == Outcome::success);
    CHECK(h.logged("output:input=Mona"));
    CHECK(h.logged("output:state=p1"));
    CHECK(value_of(result.state, "cleanup") == "yes");
    CHECK(value_of(result.outputs, "time") == "now");
}

TEST_CASE("a step runs through the bwrap wrap") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount /proc in a nested pid namespace");
    Harness h;
    h.context.policy = sandbox::Policy{};  // bwrap, network none
    h.context.policy.writable = {h.dir};
    StepSpec spec;
    spec.script = "echo wrapped\necho out=1 >> \"$GITHUB_OUTPUT\"\n";
    spec.shell = "sh";
    spec.working_directory = h.dir;
    const auto result = run_step(spec, h.context, h.job);
    INFO(result.error);
    CHECK(result.outcome == Outcome::success);
    CHECK(h.logged("output:wrapped"));
    REQUIRE(named(result.outputs, "out"));
    CHECK(value_of(result.outputs, "out") == "1");
    CHECK(result.sandbox_json.find("bwrap") != std::string::npos);
}
