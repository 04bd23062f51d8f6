// action.yml's scripts (scripts/action/setup.sh and run.sh), run as the composite action runs
// them: inputs as SANDGATE_INPUT_* variables, GITHUB_OUTPUT and GITHUB_STEP_SUMMARY files.
#include <catch2/catch.hpp>
#include <string>

#include "sandbox/run.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace {

struct Action {
    std::filesystem::path dir = tests::make_temp_dir("action");
    sandbox::Environment inputs;

    sandbox::RunResult run(const std::string& script) {
        sandbox::RunRequest request;
        request.argv = {"bash", SANDGATE_SOURCE_DIR "/scripts/action/" + script};
        request.cwd = dir;
        request.policy.mode = sandbox::SandboxMode::off;
        sandbox::Environment set = {{"SANDGATE_BIN", SANDGATE_BINARY},
                                    {"GITHUB_OUTPUT", (dir / "output").string()},
                                    {"GITHUB_STEP_SUMMARY", (dir / "summary.md").string()},
                                    {"RUNNER_TEMP", dir.string()}};
        set.insert(set.end(), inputs.begin(), inputs.end());
        request.env = sandbox::child_environment(sandbox::current_environment(), {}, set);
        return sandbox::run(request);
    }
};

}  // namespace

TEST_CASE("the action refuses bad inputs by name, before anything runs") {
    const std::pair<sandbox::Environment, std::string> cases[] = {
        {{}, "input 'run'"},
        {{{"SANDGATE_INPUT_RUN", "true"}, {"SANDGATE_INPUT_NETWORK", "everywhere"}},
         "input 'network'"},
        {{{"SANDGATE_INPUT_RUN", "true"}, {"SANDGATE_INPUT_OUTPUT_LIMIT", "lots"}},
         "input 'output-limit'"},
        {{{"SANDGATE_INPUT_RUN", "true"}, {"SANDGATE_INPUT_TIMEOUT", "soon"}}, "input 'timeout'"},
        {{{"SANDGATE_INPUT_RUN", "true"}, {"SANDGATE_INPUT_SHELL", "fish"}}, "input 'shell'"},
        {{{"SANDGATE_INPUT_RUN", "true"}, {"SANDGATE_INPUT_WORKING_DIRECTORY", "/nonexistent"}},
         "input 'working-directory'"},
        {{{"SANDGATE_INPUT_RUN", "true"}, {"SANDGATE_INPUT_OFFLINE", "maybe"}}, "input 'offline'"},
    };
    for (const auto& [inputs, message] : cases) {
        Action action;
        action.inputs = inputs;
        const auto result = action.run("run.sh");
        INFO(message << ": " << result.out.head << result.err.head);
        CHECK(result.exit_status() == 2);
        CHECK(result.out.head.find("::error title=sandgate::" + message) != std::string::npos);
        CHECK_FALSE(std::filesystem::exists(action.dir / "output"));
    }
}

TEST_CASE("the action runs the script in the wrap and publishes its outcome") {
    SKIP_UNDER_WRAP("runs bwrap, which cannot mount a new /proc inside the wrap");
    Action action;
    action.inputs = {{"SANDGATE_INPUT_RUN",
                      "echo \"in $PWD\"\necho 'SKIP-UNDER-WRAP(demo)'\n"
                      "head -c 100000 /dev/zero | tr '\\0' x\nexit 3"},  // past limit + 64 KiB tail
                     {"SANDGATE_INPUT_SHELL", "bash"},
                     {"SANDGATE_INPUT_WORKING_DIRECTORY", action.dir.string()},
                     {"SANDGATE_INPUT_NETWORK", "none"},
                     {"SANDGATE_INPUT_TIMEOUT", "60s"},
                     {"SANDGATE_INPUT_OUTPUT_LIMIT", "4"}};
    const auto result = action.run("run.sh");
    INFO(result.out.head << result.err.head);
    CHECK(result.exit_status() == 3);
    CHECK(result.out.head.find("in " + action.dir.string()) != std::string::npos);  // live output
    const std::string outputs = tests::read_file(action.dir / "output");
    CHECK(outputs.find("exit-code=3\n") != std::string::npos);
    CHECK(outputs.find("truncated=true\n") != std::string::npos);
    CHECK(outputs.find("skip-markers=1\n") != std::string::npos);
    const std::string summary = tests::read_file(action.dir / "summary.md");
    CHECK(summary.find("### sandgate") != std::string::npos);
    CHECK(summary.find("| sandbox | bwrap |") != std::string::npos);
}

TEST_CASE("setup fails clearly where user namespaces are restricted and sudo cannot lift it") {
    Action action;
    tests::write_file(action.dir / "restrict", "1\n");
    action.inputs = {{"SANDGATE_USERNS_SYSCTL", (action.dir / "restrict").string()}};
    const auto result = action.run("setup.sh");
    INFO(result.out.head << result.err.head);
    // This kernel has no such sysctl, so `sudo -n sysctl -w` fails whether or not sudo exists.
    CHECK(result.exit_status() == 1);
    CHECK(result.out.head.find("kernel.apparmor_restrict_unprivileged_userns=1") !=
          std::string::npos);
}
